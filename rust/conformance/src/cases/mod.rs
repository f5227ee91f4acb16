//! Every case, by family. A case id is `family/config`; `burnside.conformance.cases` has the
//! PyTorch side of the same ids (a test checks both lists agree).

use burnside_trace::{PortArgs, TraceError};

use crate::harness::{Case, Res};

mod basic;
#[cfg(feature = "conv")]
mod conv;
#[cfg(feature = "norms")]
mod norms;
#[cfg(feature = "activations")]
mod activations;
#[cfg(feature = "sequence")]
mod sequence;
#[cfg(feature = "losses")]
mod losses;
#[cfg(feature = "optimizers")]
mod optimizers;

type Runner = fn(&Case) -> Res<()>;

fn all() -> Vec<(&'static str, Runner)> {
    let mut cases = Vec::new();
    cases.extend(basic::cases());
    #[cfg(feature = "conv")]
    cases.extend(conv::cases());
    #[cfg(feature = "norms")]
    cases.extend(norms::cases());
    #[cfg(feature = "activations")]
    cases.extend(activations::cases());
    #[cfg(feature = "sequence")]
    cases.extend(sequence::cases());
    #[cfg(feature = "losses")]
    cases.extend(losses::cases());
    #[cfg(feature = "optimizers")]
    cases.extend(optimizers::cases());
    cases
}

pub fn ids() -> Vec<&'static str> {
    all().into_iter().map(|(id, _)| id).collect()
}

pub fn run(id: &str, args: &PortArgs) -> Res<()> {
    let Some((_, runner)) = all().into_iter().find(|(name, _)| *name == id) else {
        return Err(TraceError::Setup(format!("no case {id} (conformance --list names them)")).into());
    };
    runner(&Case::open(args)?)
}
