//! Every case, by family. A case id is `family/config`; `burnside.conformance.cases` has the
//! PyTorch side of the same ids (a test checks both lists agree).

use burnside_trace::{PortArgs, TraceError};

use crate::harness::{Case, Res};

mod basic;
mod conv;
mod norms;
mod activations;
mod sequence;
mod losses;
mod optimizers;

type Runner = fn(&Case) -> Res<()>;

fn all() -> Vec<(&'static str, Runner)> {
    let mut cases = Vec::new();
    cases.extend(basic::cases());
    cases.extend(conv::cases());
    cases.extend(norms::cases());
    cases.extend(activations::cases());
    cases.extend(sequence::cases());
    cases.extend(losses::cases());
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
