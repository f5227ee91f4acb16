//! Loading torchvision's checkpoints (`torch.save(model.state_dict(), path)`) with burn-store.
//!
//! torchvision names a stage's blocks `layer1.0`, `layer1.1`, ... and the shortcut projection
//! `downsample.0` (conv) and `downsample.1` (BatchNorm); this crate has `layer1.blocks.0` and
//! `downsample.conv` / `downsample.bn`. burn-store's `PyTorchToBurnAdapter` (which `PytorchStore`
//! applies) maps BatchNorm's `weight`/`bias` to `gamma`/`beta` and loads the running statistics.
//!
//! The classifier is read on its own, and only when its class count is the model's: a checkpoint
//! of another task then still gives its backbone to a model being fine-tuned (whose fresh head
//! stays as initialised).

use std::fmt;
use std::path::Path;

use burn::module::Param;
use burn::store::pytorch::PytorchReader;
use burn::store::{KeyRemapper, ModuleSnapshot, PytorchStore};
use burn::tensor::{Device, Tensor, TensorData};

use crate::ResNet;

/// Why a checkpoint did not load.
#[derive(Debug)]
pub struct LoadError(pub String);

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

/// torchvision's names to this crate's.
pub fn torchvision_remapper() -> KeyRemapper {
    KeyRemapper::from_patterns(vec![
        (r"^(layer[1-4])\.([0-9]+)\.", "$1.blocks.$2."),
        (r"\.downsample\.0\.", ".downsample.conv."),
        (r"\.downsample\.1\.", ".downsample.bn."),
    ])
    .expect("valid patterns")
}

/// `model` with the torchvision checkpoint at `path` loaded: every tensor of the backbone (a
/// missing one is an error), and the classifier if the checkpoint's has the model's class count.
pub fn load_torchvision(
    mut model: ResNet,
    path: impl AsRef<Path>,
    device: &Device,
) -> Result<ResNet, LoadError> {
    let path = path.as_ref();
    let fail =
        |what: &str, e: &dyn fmt::Display| LoadError(format!("{}: {what}: {e}", path.display()));
    let mut store = PytorchStore::from_file(path)
        .remap(torchvision_remapper())
        .with_predicate(|name, _| !name.starts_with("fc."));
    model
        .load_from(&mut store)
        .map_err(|e| fail("cannot load the backbone", &e))?;

    let reader = PytorchReader::new(path).map_err(|e| fail("not a PyTorch checkpoint", &e))?;
    let (Some(weight), Some(bias)) = (reader.get("fc.weight"), reader.get("fc.bias")) else {
        return Ok(model); // a backbone without a classifier
    };
    let [classes, features] = weight.shape() else {
        return Err(LoadError(format!(
            "{}: fc.weight is not a matrix",
            path.display()
        )));
    };
    let [_, model_classes] = model.fc.weight.dims(); // burn's Linear keeps [in, out]
    if *classes != model_classes {
        return Ok(model); // another task's head: keep the model's own
    }
    let read = |bytes: std::io::Result<Vec<u8>>| -> Result<Vec<f32>, LoadError> {
        let bytes = bytes.map_err(|e| fail("cannot read the classifier", &e))?;
        Ok(bytes
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    };
    // PyTorch's Linear weight is [out, in]; burn's is [in, out]
    #[cfg(not(feature = "bug-head-transposed"))]
    let w: Tensor<2> = Tensor::from_data(
        TensorData::new(read(weight.read())?, [*classes, *features]),
        device,
    )
    .transpose();
    #[cfg(feature = "bug-head-transposed")]
    let w: Tensor<2> = Tensor::from_data(
        TensorData::new(read(weight.read())?, [*features, *classes]),
        device,
    );
    let b: Tensor<1> = Tensor::from_data(TensorData::new(read(bias.read())?, [*classes]), device);
    model.fc.weight = Param::from_tensor(w);
    model.fc.bias = Some(Param::from_tensor(b));
    Ok(model)
}
