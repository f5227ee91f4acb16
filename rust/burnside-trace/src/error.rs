use std::fmt;
use std::path::PathBuf;

/// Everything that can go wrong reading an init file or writing a trace.
///
/// The message names the file and says what is wrong with it, so a port can print it and exit.
#[derive(Debug)]
pub enum TraceError {
    /// The file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The file is not valid safetensors, or a tensor could not be encoded.
    Safetensors {
        /// The file.
        path: PathBuf,
        /// What the safetensors reader or writer said.
        message: String,
    },
    /// The file is safetensors but not what burnside expects (format, version, a missing tensor).
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A tensor's shape or dtype does not fit the parameter or input it is meant for.
    Mismatch {
        /// The tensor's name in the file.
        name: String,
        /// What does not fit.
        message: String,
    },
    /// The optimizer's state could not be read back from its record.
    OptimizerState(String),
    /// The recording lacks a stage (a step without its gradients, the last step without
    /// `loss_after`, ...); the message names the call that records it.
    Incomplete(String),
    /// The port's setup does not fit its model (a parameter group naming no parameter, ...).
    Setup(String),
    /// The port's forward pass panicked or failed; the trace of what ran before it was written.
    Crashed(String),
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            TraceError::Safetensors { path, message } => {
                write!(
                    f,
                    "{}: not a readable safetensors file: {message}",
                    path.display()
                )
            }
            TraceError::Format { path, message } => write!(f, "{}: {message}", path.display()),
            TraceError::Mismatch { name, message } => write!(f, "tensor `{name}`: {message}"),
            TraceError::OptimizerState(message) => write!(f, "optimizer state: {message}"),
            TraceError::Incomplete(message) => write!(f, "incomplete trace: {message}"),
            TraceError::Crashed(message) => write!(f, "{message}"),
            TraceError::Setup(message) => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for TraceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TraceError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
