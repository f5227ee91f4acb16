use std::error::Error;
use std::fmt;
use std::path::PathBuf;

/// The command line `burnside check` gives a port:
/// `BIN --init INIT -o OUT [--steps N | --batches N] [ARGS...]` (`--batches` for a forward
/// trace's port, [`Inference`](crate::Inference); the two are synonyms).
///
/// ```no_run
/// use burnside_trace::PortArgs;
///
/// fn main() {
///     burnside_trace::run_port("my-port", |mut args: PortArgs| {
///         let bug = args.value("--bug")?;   // a port's own option, if it has one
///         args.finish()?;                    // anything else is an error
///         // ... load args.init, train args.steps steps, write args.out ...
///         Ok(())
///     });
/// }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PortArgs {
    /// The init file (`--init`): the PyTorch side's starting point.
    pub init: PathBuf,
    /// Where to write the trace (`-o` / `--out`).
    pub out: PathBuf,
    /// How many steps to train or batches to run forward (`--steps N` or its synonym
    /// `--batches N`, default 1).
    pub steps: usize,
    rest: Vec<String>,
}

/// A command line that does not follow the contract; [`run_port`] exits 2 for it.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (usage: BIN --init INIT -o OUT [--steps N | --batches N] [ARGS...])",
            self.0
        )
    }
}

impl Error for UsageError {}

impl PortArgs {
    /// This process's arguments.
    pub fn from_env() -> Result<Self, UsageError> {
        Self::parse(std::env::args().skip(1))
    }

    /// Parse `--init INIT -o OUT [--steps N | --batches N]`, keeping every other argument for
    /// [`value`](Self::value) / [`flag`](Self::flag).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, UsageError> {
        let mut args = args.into_iter();
        let (mut init, mut out, mut steps, mut rest) = (None, None, 1, Vec::new());
        while let Some(arg) = args.next() {
            let mut value = || {
                args.next()
                    .ok_or_else(|| UsageError(format!("{arg} needs a value")))
            };
            match arg.as_str() {
                "--init" => init = Some(PathBuf::from(value()?)),
                "-o" | "--out" => out = Some(PathBuf::from(value()?)),
                "--steps" | "--batches" => {
                    let text = value()?;
                    steps = text.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                        UsageError(format!("{arg} {text}: expected a count of at least 1"))
                    })?;
                }
                _ => rest.push(arg),
            }
        }
        Ok(Self {
            init: init.ok_or_else(|| UsageError("missing --init INIT".to_string()))?,
            out: out.ok_or_else(|| UsageError("missing -o OUT".to_string()))?,
            steps,
            rest,
        })
    }

    /// Take the port's own option `name VALUE` out of the remaining arguments.
    pub fn value(&mut self, name: &str) -> Result<Option<String>, UsageError> {
        let Some(i) = self.rest.iter().position(|a| a == name) else {
            return Ok(None);
        };
        if i + 1 >= self.rest.len() {
            return Err(UsageError(format!("{name} needs a value")));
        }
        let value = self.rest.remove(i + 1);
        self.rest.remove(i);
        Ok(Some(value))
    }

    /// Take the port's own switch `name` out of the remaining arguments.
    pub fn flag(&mut self, name: &str) -> bool {
        let found = self.rest.iter().position(|a| a == name);
        if let Some(i) = found {
            self.rest.remove(i);
        }
        found.is_some()
    }

    /// Refuse arguments nobody took.
    pub fn finish(&self) -> Result<(), UsageError> {
        match self.rest.first() {
            None => Ok(()),
            Some(arg) => Err(UsageError(format!("unknown argument {arg}"))),
        }
    }
}

/// A port's `main`: parse the contract's arguments, run `port`, and on failure print
/// `{bin}: {error}` as the last line of stderr (which `burnside check` reports) and exit 2 for a
/// [`UsageError`], 1 for anything else.
pub fn run_port(bin: &str, port: impl FnOnce(PortArgs) -> Result<(), Box<dyn Error>>) {
    // A panic (burn's, on a shape that does not fit) says where the recording had got to, after
    // Rust's own report: `burnside check` names that tensor beside the panic.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if crate::capture::capturing() {
            // a forward pass under graph capture: its panic is reported with what was captured
            crate::capture::keep_panic(info);
            return;
        }
        report(info);
        for line in crate::trace_recorder::recorded_shape_lines() {
            eprintln!("{line}");
        }
        if let Some(line) = crate::trace_recorder::last_recorded_line() {
            eprintln!("{line}");
        }
    }));
    let result = PortArgs::from_env()
        .map_err(|e| Box::new(e) as Box<dyn Error>)
        .and_then(port);
    if let Err(error) = result {
        eprintln!("{bin}: {error}");
        std::process::exit(if error.is::<UsageError>() { 2 } else { 1 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Result<PortArgs, UsageError> {
        PortArgs::parse(line.split_whitespace().map(String::from))
    }

    #[test]
    fn the_contract_and_a_ports_own_options() {
        let mut parsed =
            args("--init i.safetensors --bug gelu-tanh -o o.safetensors --steps 3 --fast").unwrap();
        assert_eq!(parsed.init, PathBuf::from("i.safetensors"));
        assert_eq!(parsed.out, PathBuf::from("o.safetensors"));
        assert_eq!(parsed.steps, 3);
        assert!(parsed.finish().is_err(), "--bug and --fast not taken yet");
        assert_eq!(parsed.value("--bug").unwrap().as_deref(), Some("gelu-tanh"));
        assert!(parsed.flag("--fast"));
        assert!(!parsed.flag("--fast"));
        parsed.finish().unwrap();
        assert_eq!(args("--init i -o o").unwrap().steps, 1);
        let forward = args("--init i -o o --batches 4").unwrap();
        assert_eq!(forward.steps, 4, "--batches is --steps");
        forward.finish().unwrap();
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        let message = |line: &str| args(line).unwrap_err().to_string();
        assert!(message("-o o").starts_with("missing --init INIT"));
        assert!(message("--init i").starts_with("missing -o OUT"));
        assert!(message("--init i -o o --steps 0").starts_with("--steps 0: expected"));
        assert!(message("--init i -o o --batches x").starts_with("--batches x: expected"));
        assert!(message("--init i -o o --batches").starts_with("--batches needs a value"));
        assert!(
            message("-o o")
                .ends_with("(usage: BIN --init INIT -o OUT [--steps N | --batches N] [ARGS...])")
        );
        assert!(message("--init i -o").starts_with("-o needs a value"));
        let mut parsed = args("--init i -o o --bug").unwrap();
        assert_eq!(parsed.value("--bug").unwrap_err().0, "--bug needs a value");
    }
}
