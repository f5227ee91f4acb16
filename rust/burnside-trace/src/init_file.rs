use std::collections::BTreeSet;
use std::path::Path;

use burn::module::{Module, ModuleMapper, Param};
use burn::tensor::{Device, Int, Tensor};

use crate::param_paths::is_linear_weight;
use crate::{FORMAT_VERSION, HostDType, HostTensor, SafetensorsFile, TraceError};

/// A starting point written by `burnside.torch.export_init`: `params.{path}` in PyTorch names
/// and layout, `inputs.{name}` the batch, metadata `burnside.format = init`.
#[derive(Debug, Clone)]
pub struct InitFile {
    file: SafetensorsFile,
}

impl InitFile {
    /// Read an init file, refusing anything that is not `burnside.format = init`, version 1.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let file = SafetensorsFile::read(path)?;
        let format = file.meta("burnside.format")?;
        if format != "init" {
            return Err(TraceError::Format {
                path: file.path.clone(),
                message: format!(
                    "burnside.format is `{format}`, expected `init` (an init file from burnside.torch.export_init)"
                ),
            });
        }
        let version = file.meta("burnside.version")?;
        if version != FORMAT_VERSION {
            return Err(TraceError::Format {
                path: file.path.clone(),
                message: format!(
                    "burnside.version {version} is not one this burnside-trace reads (it reads {FORMAT_VERSION})"
                ),
            });
        }
        Ok(Self { file })
    }

    /// The initial value of parameter `path` in PyTorch layout, if the file has it.
    pub fn param(&self, path: &str) -> Option<&HostTensor> {
        self.file.tensors.get(&format!("params.{path}"))
    }

    /// The names of the inputs (`x`, `y`, ...).
    pub fn input_names(&self) -> Vec<&str> {
        self.file
            .tensors
            .keys()
            .filter_map(|k| k.strip_prefix("inputs."))
            .collect()
    }

    /// Input `name` as the file holds it.
    pub fn input(&self, name: &str) -> Result<&HostTensor, TraceError> {
        self.file
            .tensors
            .get(&format!("inputs.{name}"))
            .ok_or_else(|| TraceError::Format {
                path: self.file.path.clone(),
                message: format!(
                    "no tensor `inputs.{name}` (inputs here: {:?})",
                    self.input_names()
                ),
            })
    }

    /// Float input `name` as a burn tensor of rank `D` on `device`, bit for bit.
    pub fn float_input<const D: usize>(
        &self,
        name: &str,
        device: &Device,
    ) -> Result<Tensor<D>, TraceError> {
        let input = self.input(name)?;
        check_rank(&format!("inputs.{name}"), input, D)?;
        if input.dtype == HostDType::I64 {
            return Err(TraceError::Mismatch {
                name: format!("inputs.{name}"),
                message: "is an integer tensor; read it with int_input".to_string(),
            });
        }
        Ok(Tensor::from_data(input.to_data(), device))
    }

    /// Integer input `name` (labels) as a burn tensor of rank `D` on `device`.
    pub fn int_input<const D: usize>(
        &self,
        name: &str,
        device: &Device,
    ) -> Result<Tensor<D, Int>, TraceError> {
        let input = self.input(name)?;
        check_rank(&format!("inputs.{name}"), input, D)?;
        if input.dtype != HostDType::I64 {
            return Err(TraceError::Mismatch {
                name: format!("inputs.{name}"),
                message: "is a float tensor; read it with float_input".to_string(),
            });
        }
        Ok(Tensor::from_data(input.to_data(), device))
    }

    /// Replace every float parameter of `module` by the file's `params.{path}`, bit for bit,
    /// transposing `Linear` weights into burn's `[in, out]`. Parameter ids, devices and
    /// `require_grad` are kept. Every parameter must be in the file and every file parameter
    /// must be used, with the right shape; otherwise nothing is half-loaded and the error says why.
    pub fn load_module<M: Module>(&self, module: M) -> Result<M, TraceError> {
        let mut loader = Loader {
            init: self,
            stack: Vec::new(),
            used: BTreeSet::new(),
            errors: Vec::new(),
        };
        let module = module.map(&mut loader);
        if let Some(error) = loader.errors.into_iter().next() {
            return Err(error);
        }
        let unused: Vec<&str> = self
            .file
            .tensors
            .keys()
            .filter_map(|k| k.strip_prefix("params."))
            .filter(|p| !loader.used.contains(*p))
            .collect();
        if !unused.is_empty() {
            return Err(TraceError::Format {
                path: self.file.path.clone(),
                message: format!(
                    "parameters {unused:?} are in the init file but not in the burn module"
                ),
            });
        }
        Ok(module)
    }
}

fn check_rank(name: &str, tensor: &HostTensor, rank: usize) -> Result<(), TraceError> {
    if tensor.shape.len() != rank {
        return Err(TraceError::Mismatch {
            name: name.to_string(),
            message: format!("has shape {:?}, asked for rank {rank}", tensor.shape),
        });
    }
    Ok(())
}

/// Maps a module, swapping in the init file's values by field path.
struct Loader<'a> {
    init: &'a InitFile,
    stack: Vec<(String, String)>,
    used: BTreeSet<String>,
    errors: Vec<TraceError>,
}

impl ModuleMapper for Loader<'_> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.stack
            .push((name.to_string(), container_type.to_string()));
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.stack.pop();
    }

    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let path = self
            .stack
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>()
            .join(".");
        let name = format!("params.{path}");
        let Some(stored) = self.init.param(&path) else {
            self.errors.push(TraceError::Format {
                path: self.init.file.path.clone(),
                message: format!("no tensor `{name}` for the burn module's parameter `{path}`"),
            });
            return param;
        };
        let value = if is_linear_weight(&self.stack, D) {
            stored.transposed()
        } else {
            stored.clone()
        };
        let expected = param.val().dims().to_vec();
        if value.shape != expected || value.dtype == HostDType::I64 {
            self.errors.push(TraceError::Mismatch {
                name,
                message: format!(
                    "{:?} {:?} in the file does not fit burn's {:?} (after the Linear transpose: {})",
                    stored.dtype,
                    stored.shape,
                    expected,
                    is_linear_weight(&self.stack, D)
                ),
            });
            return param;
        }
        self.used.insert(path);
        param.map(|old| {
            let tensor = Tensor::<D>::from_data(value.to_data(), &old.device());
            tensor.set_require_grad(old.is_require_grad())
        })
    }
}
