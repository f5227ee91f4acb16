//! Loading a module from tensors in PyTorch names and layout (an init file's, a checkpoint's).

use std::collections::{BTreeMap, BTreeSet};

use burn::module::Module;
use burn::store::{ApplyError, ModuleSnapshot, PyTorchToBurnAdapter, bridge};
use burn::tensor::DType;

use crate::packed::cut_parts;
use crate::torch_names::torch_leaf_of;
use crate::{HostDType, HostTensor, ParamEntry, TorchNames, param_paths_with};

/// Where the tensors a module is loaded from come from, for the messages of [`load_tensors`].
pub(crate) struct Source {
    /// What the file is: `init file`, `checkpoint`.
    pub(crate) what: &'static str,
    /// How a port gives the loading its renames.
    pub(crate) with_names: &'static str,
}

impl Source {
    pub(super) const INIT: Source = Source {
        what: "init file",
        with_names: "`InitFile::read(..)?.with_names(names.clone())`",
    };
}

/// Replace every float tensor of `module` by the tensor of its PyTorch name in `tensors`
/// (PyTorch names and layout), bit for bit (see [`InitFile::load_module`]); the message lists
/// everything that does not fit, else.
pub(crate) fn load_tensors<'t, M: Module>(
    mut module: M,
    tensors: impl IntoIterator<Item = (&'t str, &'t HostTensor)>,
    names: &TorchNames,
    source: &Source,
) -> Result<M, String> {
    let entries = param_paths_with(&module, names);
    // One PyTorch name, several burn tensors where PyTorch packs them (an RNN's gates).
    let mut by_torch: BTreeMap<&str, Vec<&ParamEntry>> = BTreeMap::new();
    for entry in &entries {
        by_torch
            .entry(entry.torch.as_str())
            .or_default()
            .push(entry);
    }
    // Each float tensor's own dtype: a half file's tensor goes into an f32 (f64) module widened exactly,
    // as the module holds it (burn-store would load it as itself, a bf16 parameter in an f32 model).
    let own: BTreeMap<String, DType> = module
        .collect(None, None, false)
        .into_iter()
        .map(|t| (t.name.clone(), t.dtype))
        .collect();
    let mut loaded = Vec::new();
    let mut unused = Vec::new();
    let mut uncut = Vec::new();
    let mut uncut_names = BTreeSet::new();
    for (name, value) in tensors {
        match by_torch.get(name) {
            Some(group) if value.dtype != HostDType::I64 => match cut_parts(value, group) {
                Some(parts) => {
                    for (entry, part) in parts {
                        let mut data = part.to_data();
                        if let Some(&dtype) = own.get(&entry.path)
                            && dtype.is_float()
                            && dtype != data.dtype()
                            && matches!(part.dtype, HostDType::BF16 | HostDType::F16)
                        {
                            data = data.convert_dtype(dtype);
                        }
                        loaded.push(bridge::from_data(data, entry.path.clone(), None));
                    }
                }
                None => {
                    uncut_names.insert(name.to_string());
                    let of = group[0].part.map_or(1, |p| p.of);
                    uncut.push(format!(
                            "  `{name}`: the file's tensor is {:?}, which does not cut into {of} gates along dimension 0",
                            value.shape
                        ));
                }
            },
            // PyTorch's BatchNorm step count: burn keeps none
            None if name.ends_with("num_batches_tracked") => {}
            Some(_) => {
                // An integer tensor where burn has a float one: say so, not "missing" and "unused".
                uncut_names.insert(name.to_string());
                uncut.push(format!(
                        "  `{name}`: the file's tensor is {:?} {:?}, the burn module's is a float tensor",
                        value.dtype, value.shape
                    ));
            }
            _ => unused.push(name.to_string()),
        }
    }
    let result = module.apply(loaded, None, Some(Box::new(PyTorchToBurnAdapter)), false);
    let missing_paths: BTreeSet<&str> = result.missing.iter().map(|(p, _)| p.as_str()).collect();
    let missing: Vec<&ParamEntry> = entries
        .iter()
        .filter(|e| !e.buffer && missing_paths.contains(e.path.as_str()))
        .collect();
    unused.extend(
        result
            .unused
            .iter()
            .filter_map(|path| entries.iter().find(|e| &e.path == path))
            .map(|e| e.torch.clone()),
    );
    let missing: Vec<&ParamEntry> = missing
        .into_iter()
        .filter(|e| !uncut_names.contains(&e.torch))
        .collect();
    if missing.is_empty() && unused.is_empty() && uncut.is_empty() && result.errors.is_empty() {
        return Ok(module);
    }
    Err(misfit(
        source,
        &entries,
        &missing,
        &unused,
        &uncut,
        &result.errors,
    ))
}

/// Everything that keeps the module from loading, in one message that says what to do.
fn misfit(
    source: &Source,
    entries: &[ParamEntry],
    missing: &[&ParamEntry],
    unused: &[String],
    uncut: &[String],
    errors: &[ApplyError],
) -> String {
    let mut lines = vec![format!("the burn module does not fit this {}", source.what)];
    if !missing.is_empty() {
        lines.push(format!(
                "  {} burn tensor(s) not in the file (burn path -> PyTorch name <- closest unused name in the file):",
                missing.len()
            ));
        for entry in missing {
            let hint = closest(&entry.torch, unused)
                .map(|(_, u)| format!(" <- `{u}`?"))
                .unwrap_or_default();
            let slice = entry
                .part
                .map(|p| format!(" (gate {} of {})", p.index + 1, p.of))
                .unwrap_or_default();
            lines.push(format!(
                "    `{}` -> `{}`{slice}{hint}",
                entry.path, entry.torch
            ));
        }
    }
    if !unused.is_empty() {
        lines.push(format!(
                "  {} tensor(s) of the file used by no burn tensor (closest burn tensor's PyTorch name):",
                unused.len()
            ));
        let names: Vec<String> = entries.iter().map(|e| e.torch.clone()).collect();
        for name in unused {
            let hint = closest(name, &names)
                .map(|(_, n)| format!(" (`{n}`?)"))
                .unwrap_or_default();
            lines.push(format!("    `{name}`{hint}"));
        }
    }
    lines.extend(uncut.iter().cloned());
    for error in errors {
        lines.push(match error {
            ApplyError::ShapeMismatch {
                path,
                expected,
                found,
            } => format!(
                "  `{path}`: the file's tensor is {:?} in burn's layout, the burn module's is {:?}",
                found.as_slice(),
                expected.as_slice()
            ),
            other => format!("  {other}"),
        });
    }
    let pair = missing
        .iter()
        .filter_map(|e| closest(&e.torch, unused).map(|(s, u)| (s, e.torch.clone(), u)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, torch, file)| (torch, file));
    lines.push(match pair {
            Some((torch, file)) => format!(
                "fix: name the burn fields like the PyTorch module's attributes, or map the names once \
                 and use the mapping for loading and recording alike: \
                 `let names = TorchNames::new().table([(\"{torch}\", \"{file}\")])?;` then \
                 {} and the same names to the recorder, `Training::new(..).with_names(names)` \
                 (`Inference::new().with_names(names)`, `TraceRecorder::new(..).with_names(names)`)",
                source.with_names
            ),
            None => "fix: build the burn module with the PyTorch model's sizes and attribute names \
                     (or map names with TorchNames, given to the loading (InitFile::with_names, \
                     load_pytorch_checkpoint_with) and the recorder (Training::with_names, \
                     Inference::with_names or TraceRecorder::with_names))"
                .to_string(),
        });
    lines.join("\n")
}

/// The name in `candidates` most like `name` and how alike (Jaro-Winkler, 0..1): among those
/// with the same last segment (`weight`, `bias`, `running_var`) if there are any, since a rename
/// keeps it; otherwise only one alike enough to be a likely rename.
///
/// A burn leaf that PyTorch names otherwise (`gamma` -> `weight`, `beta` -> `bias`, `alpha` ->
/// `weight`), or the reverse, under the same parent is the match before any likeness: the
/// rename the file's name most likely needs (`blk.gamma` <- `blk.weight`, not `blk.bias`).
fn closest(name: &str, candidates: &[String]) -> Option<(f64, String)> {
    let split = |s: &str| match s.rsplit_once('.') {
        Some((parent, leaf)) => (parent.to_string(), leaf.to_string()),
        None => (String::new(), s.to_string()),
    };
    let (parent, own) = split(name);
    let paired = candidates.iter().find(|c| {
        let (their_parent, theirs) = split(c);
        their_parent == parent
            && (torch_leaf_of(&own) == Some(theirs.as_str())
                || torch_leaf_of(&theirs) == Some(own.as_str()))
    });
    if let Some(c) = paired {
        return Some((1.0, c.clone()));
    }
    let leaf = |s: &str| s.rsplit('.').next().map(str::to_string);
    let best = |pool: &mut dyn Iterator<Item = &String>| {
        pool.map(|c| (textdistance::nstr::jaro_winkler(name, c), c))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(similarity, c)| (similarity, c.clone()))
    };
    best(&mut candidates.iter().filter(|c| leaf(c) == leaf(name)))
        .or_else(|| best(&mut candidates.iter()).filter(|(similarity, _)| *similarity >= 0.8))
}
