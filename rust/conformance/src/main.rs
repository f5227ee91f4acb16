//! The burn side of `burnside conformance`: one case per run, trained as a user's port is trained.
//!
//! ```text
//! conformance --list                                   # every case id, one per line
//! conformance --case ID --init INIT -o OUT [--steps N] # the case's burn trace
//! ```
//!
//! A case is one burn module, loss or optimizer with a PyTorch twin, in one configuration. Its
//! PyTorch side (`burnside.conformance.cases`) builds the twin inside a harness whose parameter `x`
//! is the layer's input, so the input's gradient is recorded as `grads.x`, and whose loss is
//! `sum(output * probe)` for a fixed random `probe` (a loss case's loss is the loss itself).
//! This side builds the burn module with the same configuration, loads PyTorch's weights from the
//! init file (burn-store's PyTorch adapter, as a port does) and trains it with
//! `burnside_trace::Training`, so the trace holds what a port's would.

mod cases;
mod harness;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for id in cases::ids() {
            println!("{id}");
        }
        return;
    }
    burnside_trace::run_port("conformance", |mut args| {
        let case = args
            .value("--case")?
            .ok_or_else(|| burnside_trace::UsageError("missing --case ID (see --list)".to_string()))?;
        args.finish()?;
        cases::run(&case, &args)
    });
}
