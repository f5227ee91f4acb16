//! burnside-trace's readers (`SafetensorsFile::read`, `InitFile::read`, `load_module`, the
//! inputs) against hostile files: each named case below, then a seeded mutation loop over the
//! Python fixtures. Every file is refused with a `TraceError` naming it and what is wrong, or
//! read; none panics, and none makes the reader allocate what a header claims.

mod common;
// The seeded mutation loop, in a file of its own (a folder beside this file is no test target of its own).
#[path = "hostile_readers/mutants.rs"]
mod mutants;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use burn::tensor::Device;
use burnside_trace::{InitFile, SafetensorsFile, TraceError};

use common::{fixture, scratch, tiny};

// ---------------------------------------------------------------------------------------------
// The largest single allocation made by the thread that asked for it (`largest_allocation`).

struct Measuring;

thread_local! {
    static MEASURING: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Measuring {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

fn note(size: usize) {
    let _ = MEASURING.try_with(|on| {
        if on.get() {
            let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
        }
    });
}

#[global_allocator]
static ALLOCATOR: Measuring = Measuring;

/// `f`'s result and the largest single allocation it made on this thread.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    MEASURING.with(|m| m.set(true));
    let result = f();
    MEASURING.with(|m| m.set(false));
    (result, LARGEST.with(Cell::get))
}

// ---------------------------------------------------------------------------------------------
// Hand-made files.

/// A safetensors file: the 8-byte length, `header`, then `data`.
fn raw(header: &str, data: &[u8]) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

const INIT_META: &str = r#""__metadata__":{"burnside.format":"init","burnside.version":"1"}"#;

/// An init file's header: the init metadata, then `tensors` (JSON object entries).
fn init_header(tensors: &str) -> String {
    if tensors.is_empty() {
        format!("{{{INIT_META}}}")
    } else {
        format!("{{{INIT_META},{tensors}}}")
    }
}

fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = scratch("hostile", name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The error `InitFile::read` gives for `bytes`, checked to be one line naming the file.
fn refused(name: &str, bytes: &[u8]) -> String {
    let path = write(name, bytes);
    let error = InitFile::read(&path).expect_err("a hostile file is refused");
    one_line_naming(&error, &path)
}

fn one_line_naming(error: &TraceError, path: &Path) -> String {
    let message = error.to_string();
    assert!(
        message.contains(&path.display().to_string()),
        "names the file: {message}"
    );
    assert!(!message.contains('\n'), "one line: {message}");
    message
}

fn assert_says(message: &str, words: &str) {
    assert!(message.contains(words), "`{words}` in: {message}");
}

fn tiny_init_bytes() -> Vec<u8> {
    std::fs::read(fixture("tiny_init.safetensors")).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Named cases: one per class of hostile file (each a regression test of the reader).

#[test]
fn a_missing_empty_or_directory_path_is_an_error() {
    let missing = scratch("hostile", "no-such.safetensors");
    let error = InitFile::read(&missing).unwrap_err();
    assert!(matches!(error, TraceError::Io { .. }), "{error}");
    one_line_naming(&error, &missing);
    assert_says(
        &refused("empty.safetensors", b""),
        "0 bytes long, too short",
    );
    assert_says(&refused("seven.safetensors", b"1234567"), "7 bytes long");
    let dir = scratch("hostile", "a-directory");
    std::fs::create_dir_all(&dir).unwrap();
    let error = InitFile::read(&dir).unwrap_err();
    assert_says(&one_line_naming(&error, &dir), "directory");
}

#[test]
fn a_truncated_file_is_refused_at_every_length() {
    let whole = tiny_init_bytes();
    for len in 0..whole.len() {
        let message = refused("truncated.safetensors", &whole[..len]);
        assert!(
            message.contains("truncated?")
                || message.contains("too short")
                || message.contains("not JSON"),
            "cut at {len}: {message}"
        );
    }
    assert!(InitFile::read(write("whole.safetensors", &whole)).is_ok());
}

#[test]
fn bytes_after_the_last_tensor_are_refused() {
    let mut bytes = tiny_init_bytes();
    bytes.extend_from_slice(&[0; 4]);
    assert_says(
        &refused("trailing.safetensors", &bytes),
        "bytes after the last tensor",
    );
}

#[test]
fn a_header_length_beyond_the_file_or_the_limit_is_refused_without_reading() {
    let mut bytes = tiny_init_bytes();
    let real = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    bytes[..8].copy_from_slice(&(real + 1000).to_le_bytes());
    assert_says(
        &refused("long-header.safetensors", &bytes),
        "but only 472 follow it",
    );
    for claim in [100_000_001, u64::MAX / 2, u64::MAX] {
        bytes[..8].copy_from_slice(&claim.to_le_bytes());
        let (message, largest) = largest_allocation(|| refused("huge-header.safetensors", &bytes));
        assert_says(
            &message,
            "more than the 100000000 a safetensors header may have",
        );
        assert!(largest < 1 << 20, "allocated {largest} bytes for {claim}");
    }
}

#[test]
fn a_header_that_is_not_utf8_or_not_a_json_object_is_refused() {
    let mut header = init_header("").into_bytes();
    header[20] = 0xff;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(&header);
    assert_says(
        &refused("latin1.safetensors", &bytes),
        "not UTF-8 (invalid byte at offset 28)",
    );
    assert_says(
        &refused("not-json.safetensors", &raw("{nope", b"")),
        "not JSON",
    );
    assert_says(
        &refused("list.safetensors", &raw("[1, 2]", b"")),
        "JSON but not an object",
    );
}

#[test]
fn non_string_metadata_is_refused() {
    let header = r#"{"__metadata__":{"burnside.format":"init","burnside.version":1}}"#;
    assert_says(
        &refused("int-version.safetensors", &raw(header, b"")),
        "metadata `burnside.version` is a number, not a string",
    );
    let header = r#"{"__metadata__":["burnside.format"]}"#;
    assert_says(
        &refused("meta-list.safetensors", &raw(header, b"")),
        "`__metadata__` is a list, not an object of strings",
    );
}

#[test]
fn a_missing_or_wrong_format_or_version_is_refused() {
    let cases = [
        (r#"{}"#, "metadata key `burnside.format` is missing"),
        (
            r#"{"__metadata__":{"burnside.version":"1"}}"#,
            "metadata key `burnside.format` is missing",
        ),
        (
            r#"{"__metadata__":{"burnside.format":"trace","burnside.version":"1"}}"#,
            "burnside.format is `trace`, expected `init`",
        ),
        (
            r#"{"__metadata__":{"burnside.format":"init"}}"#,
            "metadata key `burnside.version` is missing",
        ),
        (
            r#"{"__metadata__":{"burnside.format":"init","burnside.version":"2"}}"#,
            "burnside.version 2 is not one this burnside-trace reads",
        ),
    ];
    for (header, words) in cases {
        assert_says(&refused("meta.safetensors", &raw(header, b"")), words);
    }
}

#[test]
fn a_dtype_burnside_does_not_read_or_no_dtype_at_all_is_refused() {
    let i32 = init_header(r#""params.w":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}"#);
    assert_says(
        &refused("i32.safetensors", &raw(&i32, &[0; 8])),
        "tensor `params.w` has dtype I32; burnside-trace reads F32, F64, BF16, F16 and I64",
    );
    let odd = init_header(r#""params.w":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}"#);
    assert_says(
        &refused("f31.safetensors", &raw(&odd, &[0; 8])),
        "dtype `F31`, which is no safetensors dtype",
    );
    let none = init_header(r#""params.w":{"shape":[2],"data_offsets":[0,8]}"#);
    assert_says(
        &refused("no-dtype.safetensors", &raw(&none, &[0; 8])),
        "tensor `params.w` has no `dtype`",
    );
}

#[test]
fn bad_shapes_and_offsets_are_refused() {
    let cases = [
        (
            r#"{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}"#,
            "is not a list of whole numbers",
        ),
        (
            r#"{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}"#,
            "is not a list of whole numbers",
        ),
        (
            r#"{"dtype":"F32","shape":2,"data_offsets":[0,8]}"#,
            "shape is a number, not a list",
        ),
        (
            r#"{"dtype":"F32","shape":[2],"data_offsets":[0]}"#,
            "are not [start, end]",
        ),
        (
            r#"{"dtype":"F32","shape":[2],"data_offsets":[8,0]}"#,
            "end before they start",
        ),
        (
            r#"{"dtype":"F32","shape":[2],"data_offsets":[0,12]}"#,
            "is F32 [2], 8 bytes, but its data_offsets [0, 12] hold 12",
        ),
        (
            r#"{"dtype":"F32","shape":[2],"data_offsets":[4,12]}"#,
            "bytes 0 to 4 of the data belong to no tensor",
        ),
        (
            r#"{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}"#,
            "take 8 bytes of data but 4 follow",
        ),
        (r#"[]"#, "is a list, not an object"),
    ];
    for (tensor, words) in cases {
        let header = init_header(&format!(r#""params.w":{tensor}"#));
        assert_says(&refused("shape.safetensors", &raw(&header, &[0; 4])), words);
    }
}

#[test]
fn overlapping_and_out_of_range_offsets_are_refused() {
    let overlap = init_header(concat!(
        r#""params.a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"#,
        r#""params.b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}"#
    ));
    assert_says(
        &refused("overlap.safetensors", &raw(&overlap, &[0; 12])),
        "tensor `params.b`'s data_offsets [4, 12] overlap tensor `params.a`'s, which end at 8",
    );
    let same = init_header(concat!(
        r#""params.a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"#,
        r#""params.b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}"#
    ));
    assert_says(
        &refused("same.safetensors", &raw(&same, &[0; 8])),
        "overlap tensor `params.a`'s",
    );
    let beyond = init_header(r#""params.a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}"#);
    assert_says(
        &refused("beyond.safetensors", &raw(&beyond, &[0; 3])),
        "take 8 bytes of data but 3 follow the header (truncated?)",
    );
}

#[test]
fn a_header_claiming_a_1e15_element_tensor_fails_fast_without_allocating_it() {
    let header = init_header(
        r#""params.w":{"dtype":"F32","shape":[1000000,1000000000],"data_offsets":[0,4000000000000000]}"#,
    );
    let bytes = raw(&header, &[0; 64]);
    let started = Instant::now();
    let (message, largest) = largest_allocation(|| refused("1e15.safetensors", &bytes));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_says(
        &message,
        "take 4000000000000000 bytes of data but 64 follow the header",
    );
    assert!(largest < 1 << 20, "allocated {largest} bytes");
}

#[cfg(unix)]
#[test]
fn a_1e15_element_claim_through_a_pipe_fails_at_the_pipes_end_without_allocating_it() {
    // A pipe has no length to check the claim against: the buffer grows only as bytes come.
    let header = init_header(
        r#""params.w":{"dtype":"F32","shape":[1000000,1000000000],"data_offsets":[0,4000000000000000]}"#,
    );
    let bytes = raw(&header, &[0; 64]);
    let fifo = scratch("hostile", "claim.fifo");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        return; // no mkfifo here
    }
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, bytes).unwrap())
    };
    let (message, largest) = largest_allocation(|| {
        let error = SafetensorsFile::read(&fifo).unwrap_err();
        one_line_naming(&error, &fifo)
    });
    writer.join().unwrap();
    assert_says(
        &message,
        "tensor `params.w` needs bytes 0 to 4000000000000000 of the data but the file ends at 64",
    );
    assert!(largest < 1 << 20, "allocated {largest} bytes");
}

#[test]
fn a_shape_whose_element_count_overflows_usize_is_refused() {
    for shape in [
        "[4294967296,4294967296]",
        "[18446744073709551615,2]",
        "[18446744073709551616]",
        "[4611686018427387904]", // fits usize, but not once multiplied by 4 bytes
    ] {
        let header = init_header(&format!(
            r#""params.w":{{"dtype":"F32","shape":{shape},"data_offsets":[0,0]}}"#
        ));
        let message = refused("overflow.safetensors", &raw(&header, b""));
        assert!(
            message.contains("more elements than memory can address")
                || message.contains("not a list of whole numbers"),
            "{shape}: {message}"
        );
    }
    // A zero dimension makes any other dimension harmless.
    let header = init_header(
        r#""inputs.x":{"dtype":"F32","shape":[0,18446744073709551615],"data_offsets":[0,0]}"#,
    );
    let path = write("zero.safetensors", &raw(&header, b""));
    assert_eq!(
        InitFile::read(&path)
            .unwrap()
            .input_at(0, "x")
            .unwrap()
            .len(),
        0
    );
}

#[test]
fn a_key_given_twice_is_refused() {
    let twice = init_header(concat!(
        r#""params.w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"#,
        r#""params.w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}"#
    ));
    assert_says(
        &refused("dup-tensor.safetensors", &raw(&twice, &[0; 4])),
        "the header has key `params.w` twice",
    );
    let meta = r#"{"__metadata__":{"burnside.format":"init","burnside.version":"1","burnside.format":"trace"}}"#;
    assert_says(
        &refused("dup-meta.safetensors", &raw(meta, b"")),
        "key `burnside.format` in `__metadata__` twice",
    );
    // The same name in two different objects, and an escaped quote in a key, are fine.
    let fine = init_header(r#""params.a\"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}"#);
    let path = write("fine.safetensors", &raw(&fine, &[0; 4]));
    assert!(InitFile::read(&path).unwrap().param("a\"b").is_some());
    let escaped = r#"{"__metadata__":{"burnside.format":"init","burnside.version":"1","a":"x","\u0061":"y"}}"#;
    assert_says(
        &refused("dup-escaped.safetensors", &raw(escaped, b"")),
        "key `a` in `__metadata__` twice",
    );
}

#[test]
fn nan_payloads_are_read_bit_for_bit_into_the_module() {
    let payloads: [u32; 6] = [
        0x7fc0_0000,
        0xffc0_0000,
        0x7fc0_0001,
        0x7f80_0001,
        0xffff_ffff,
        0x7f80_0000,
    ];
    let mut bytes = tiny_init_bytes();
    // params.fc.weight is the last tensor: [2, 3] F32, the file's last 24 bytes
    let start = bytes.len() - 24;
    for (i, bits) in payloads.iter().enumerate() {
        bytes[start + 4 * i..start + 4 * i + 4].copy_from_slice(&bits.to_le_bytes());
    }
    let path = write("nan.safetensors", &bytes);
    let init = InitFile::read(&path).unwrap();
    let weight = init.param("fc.weight").unwrap().to_f32().unwrap();
    let read: Vec<u32> = weight.iter().map(|v| v.to_bits()).collect();
    assert_eq!(read, payloads);
    let device = Device::default();
    let model = init.load_module(tiny(&device)).unwrap();
    // burn's [in, out] is PyTorch's [out, in] transposed
    let loaded: Vec<u32> = model
        .fc
        .weight
        .val()
        .into_data()
        .try_to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    let transposed: Vec<u32> = [0, 3, 1, 4, 2, 5].iter().map(|&i| payloads[i]).collect();
    assert_eq!(loaded, transposed);
}

#[test]
fn wrong_names_dtypes_and_shapes_are_refused_by_load_module() {
    let device = Device::default();
    let with = |tensors: &str, data: &[u8]| {
        let path = write("module.safetensors", &raw(&init_header(tensors), data));
        InitFile::read(&path)
            .unwrap()
            .load_module(tiny(&device))
            .unwrap_err()
            .to_string()
    };
    let renamed = with(
        concat!(
            r#""params.fc.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"#,
            r#""params.head.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[8,32]}"#
        ),
        &[0; 32],
    );
    assert_says(&renamed, "`fc.weight` -> `fc.weight` <- `head.weight`?");
    let integer = with(
        concat!(
            r#""params.fc.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"#,
            r#""params.fc.weight":{"dtype":"I64","shape":[2,3],"data_offsets":[8,56]}"#
        ),
        &[0; 56],
    );
    assert_says(&integer, "`fc.weight`: the file's tensor is I64");
    let shaped = with(
        concat!(
            r#""params.fc.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"#,
            r#""params.fc.weight":{"dtype":"F32","shape":[3,2,1],"data_offsets":[8,32]}"#
        ),
        &[0; 32],
    );
    assert_says(&shaped, "`fc.weight`");
    let huge = with(
        concat!(
            r#""params.fc.bias":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"#,
            r#""params.fc.weight":{"dtype":"F32","shape":[0,4294967296],"data_offsets":[8,8]}"#
        ),
        &[0; 8],
    );
    assert_says(&huge, "`fc.weight`");
}

#[test]
fn inputs_of_the_wrong_dtype_or_rank_are_refused() {
    let path = fixture("tiny_init.safetensors");
    let init = InitFile::read(&path).unwrap();
    let device = Device::default();
    assert_says(
        &init
            .int_input_at::<2>(0, "x", &device)
            .unwrap_err()
            .to_string(),
        "is a float tensor",
    );
    assert_says(
        &init
            .float_input_at::<1>(0, "y", &device)
            .unwrap_err()
            .to_string(),
        "is an integer tensor",
    );
    assert_says(
        &init
            .float_input_at::<3>(0, "x", &device)
            .unwrap_err()
            .to_string(),
        "asked for rank 3",
    );
    assert_says(
        &init.input_at(0, "z").unwrap_err().to_string(),
        "no tensor `inputs.z`",
    );
}

/// Regression (mutant 85 of the loop below, one bit flipped in `inputs.y`): a label beyond
/// burn's `int_dtype` (i32 here) made `Tensor::from_data` panic ("Element cannot be represented
/// in the target type") inside `int_input_at`.
#[test]
fn an_integer_input_beyond_burns_int_dtype_is_an_error_not_a_panic() {
    let device = Device::default();
    let int_dtype = device.settings().int_dtype;
    for label in [9_007_199_254_740_992_i64, i64::MIN, 1 << 31] {
        let mut data = 1_i64.to_le_bytes().to_vec();
        data.extend_from_slice(&label.to_le_bytes());
        let header = init_header(r#""inputs.y":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}"#);
        let path = write("big-label.safetensors", &raw(&header, &data));
        let init = InitFile::read(&path).unwrap();
        match int_dtype {
            burn::tensor::IntDType::I64 => {
                init.int_input_at::<1>(0, "y", &device).unwrap();
            }
            _ => assert_says(
                &init
                    .int_input_at::<1>(0, "y", &device)
                    .unwrap_err()
                    .to_string(),
                &format!(
                    "tensor `inputs.y`: element 1 is {label}, which burn's {int_dtype:?} integers"
                ),
            ),
        }
    }
}
