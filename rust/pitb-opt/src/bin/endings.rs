//! Every way a burn program can end, for burnside's tests (tests/burn/test_endings.py):
//! `endings MODE [-o OUT]` (or the port contract's `endings --init INIT -o OUT ... --ending MODE`,
//! as `burnside check` runs it), MODE one of
//!
//! - `exit`: says why on stderr and exits with status 3;
//! - `panic`: panics in its own code; `burn-panic`: a shape mismatch panics inside burn;
//! - `abort` (SIGABRT), `segv` (SIGSEGV);
//! - `sleep`: writes half of OUT's temporary file (named as burnside-trace names it) and sleeps,
//!   to be stopped by a signal;
//! - `write`: writes a 4 MiB trace to OUT through burnside-trace's writer (under a file-size
//!   limit it dies of SIGXFSZ with its temporary file behind).

use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor, TensorData};
use burnside_trace::{OptimizerSpec, TraceRecorder};

fn out_path() -> std::path::PathBuf {
    let args: Vec<String> = std::env::args().collect();
    let at = args
        .iter()
        .position(|a| a == "-o")
        .expect("endings: -o OUT is required");
    std::path::PathBuf::from(&args[at + 1])
}

fn own_panic(count: usize) -> usize {
    if count < 10 {
        panic!("endings: the port's own check failed ({count} < 10)");
    }
    count
}

fn burn_panic() {
    let device = Device::default();
    let a = Tensor::<2>::zeros([2, 3], &device);
    let b = Tensor::<2>::zeros([4, 5], &device);
    println!("{}", a.matmul(b));
}

/// A training loop's backward pass on a device without autodiff: burn panics.
fn no_autodiff() {
    let device = Device::default();
    let x = Tensor::<2>::ones([2, 3], &device);
    let _ = x.sum().backward();
}

fn mode() -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == "--ending") {
        Some(at) => args.get(at + 1).cloned(),
        None => args.get(1).cloned(),
    }
}

/// One A1 SGD step recorded as `train-step` records it, plus a 4 MiB input, written to OUT.
fn write_trace() -> Result<(), burnside_trace::TraceError> {
    let device = Device::default().autodiff();
    let (x, y) = a1::a1_data(&device);
    let mut model = a1::a1_model(&device);
    let ce = a1::ce(&device);
    let spec = OptimizerSpec::sgd(a1::SGD_LR);
    let mut optim = spec.init();
    let mut recorder = TraceRecorder::new(spec).with_loss_fn("cross_entropy");
    recorder.input(0, "x", x.to_data())?;
    recorder.input(0, "y", y.to_data())?;
    recorder.input(
        0,
        "big",
        TensorData::new(vec![0.5f32; 1 << 20], [1024, 1024]),
    )?;
    recorder.params_before(0, &model)?;
    let logits = model.forward(x.clone());
    recorder.logits(0, &logits)?;
    let loss = ce.forward(logits, y.clone());
    recorder.loss(0, &loss)?;
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    recorder.grads(0, &model, &grads)?;
    model = optim.step(a1::SGD_LR, model, grads);
    recorder.params_after(0, &model)?;
    recorder.optim(0, &model, &optim)?;
    recorder.loss_after(0, &ce.forward(model.forward(x), y))?;
    recorder.write(out_path())
}

fn main() {
    match mode().as_deref() {
        Some("exit") => {
            eprintln!("endings: told to fail with status 3");
            std::process::exit(3);
        }
        Some("panic") => {
            own_panic(std::env::args().count());
        }
        Some("burn-panic") => burn_panic(),
        Some("no-autodiff") => no_autodiff(),
        Some("abort") => {
            eprintln!("endings: aborting");
            std::process::abort();
        }
        Some("segv") => {
            // A non-null, aligned address that is never mapped: a plain segmentation fault
            // (a null pointer would trip the debug-assertion check and abort instead).
            unsafe { std::ptr::without_provenance_mut::<u8>(8).write_volatile(1) };
        }
        Some("sleep") => {
            let out = out_path();
            let dir = out.parent().expect("endings: OUT has a directory");
            let name = out.file_name().expect("endings: OUT has a file name");
            let temp = dir.join(format!(
                ".{}.{}.tmp",
                name.to_string_lossy(),
                std::process::id()
            ));
            std::fs::write(&temp, [0u8; 1024]).expect("endings: writing the temporary file");
            eprintln!("endings: wrote {}", temp.display());
            std::thread::sleep(std::time::Duration::from_secs(60));
        }
        Some("write") => {
            if let Err(e) = write_trace() {
                eprintln!("endings: {e}");
                std::process::exit(1);
            }
        }
        other => {
            eprintln!("endings: unknown mode {other:?}; see the source's first lines");
            std::process::exit(2);
        }
    }
}
