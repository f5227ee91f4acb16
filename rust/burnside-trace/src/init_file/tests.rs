use burn::tensor::{Device, Int, Tensor};

use super::*;

mod load_tests {
    use super::*;
    use burn::nn::{BatchNorm, BatchNormConfig, LayerNorm, LayerNormConfig};

    #[derive(Module, Debug)]
    struct Norms {
        bn: BatchNorm,
        ln: LayerNorm,
    }

    #[test]
    fn pytorch_norm_weights_and_running_stats_load_into_burn_names() {
        let f32s = |v: &[f32]| HostTensor::from_f32(v, vec![v.len()]);
        let init = init_with(
            "norms",
            &[
                ("params.bn.weight", f32s(&[1.5, 2.5])),
                ("params.bn.bias", f32s(&[0.5, -0.5])),
                ("buffers.bn.running_mean", f32s(&[0.25, 0.75])),
                ("buffers.bn.running_var", f32s(&[2.0, 3.0])),
                (
                    "buffers.bn.num_batches_tracked",
                    HostTensor::from_i64(&[7], vec![]),
                ),
                ("params.ln.weight", f32s(&[3.0, 4.0, 5.0])),
                ("params.ln.bias", f32s(&[0.0, 1.0, 2.0])),
            ],
        );
        let device = Device::default().autodiff();
        let norms = Norms {
            bn: BatchNormConfig::new(2).init(&device),
            ln: LayerNormConfig::new(3).init(&device),
        };
        let norms = init.load_module(norms).unwrap();
        let values = |t: Tensor<1>| t.into_data().try_to_vec::<f32>().unwrap();
        assert_eq!(values(norms.bn.gamma.val()), vec![1.5, 2.5]);
        assert_eq!(values(norms.bn.running_mean.value()), vec![0.25, 0.75]);
        assert_eq!(values(norms.bn.running_var.value()), vec![2.0, 3.0]);
        assert_eq!(
            values(norms.ln.beta.as_ref().unwrap().val()),
            vec![0.0, 1.0, 2.0]
        );
        assert!(norms.ln.gamma.val().is_require_grad());
        assert!(!norms.bn.running_mean.value().is_require_grad());
    }

    #[test]
    fn a_constant_buffer_the_module_has_no_place_for_is_left_unused_and_readable() {
        let f32s = |v: &[f32]| HostTensor::from_f32(v, vec![v.len()]);
        let tensors = [
            ("params.ln.weight", f32s(&[3.0, 4.0, 5.0])),
            ("params.ln.bias", f32s(&[0.0, 1.0, 2.0])),
            ("buffers.pe", f32s(&[0.0, 1.0, 0.5, 0.25])),
        ];
        #[derive(Module, Debug)]
        struct Ln {
            ln: LayerNorm,
        }
        let device = Device::default();
        let module = || Ln {
            ln: LayerNormConfig::new(3).init(&device),
        };
        // declared constant (the PyTorch run never changed it): the port computes it inline or reads it
        let init = init_with_metadata(
            "constant-buffer",
            &tensors,
            &[("constant_buffers", "[\"pe\"]")],
        );
        init.load_module(module()).unwrap();
        assert_eq!(init.buffer("pe").unwrap().shape, vec![4]);
        // not declared constant: a tensor of the file no part of the module takes is still refused
        let strict = init_with("strict-buffer", &tensors);
        let message = strict.load_module(module()).unwrap_err().to_string();
        assert!(message.contains("pe"), "{message}");
    }
}

/// For the crate's unit tests: an init file holding `tensors`, written to a temporary file (named by
/// `tag`) and read back.
pub(crate) fn init_with(tag: &str, tensors: &[(&str, HostTensor)]) -> InitFile {
    init_with_metadata(tag, tensors, &[])
}

/// [`init_with`], with metadata keys of its own (`full_steps`, ...).
pub(crate) fn init_with_metadata(
    tag: &str,
    tensors: &[(&str, HostTensor)],
    extra: &[(&str, &str)],
) -> InitFile {
    try_init_with(tag, tensors, extra).unwrap()
}

/// The init file holding `tensors` and `extra` metadata, as `InitFile::read` reads it.
pub(crate) fn try_init_with(
    tag: &str,
    tensors: &[(&str, HostTensor)],
    extra: &[(&str, &str)],
) -> Result<InitFile, TraceError> {
    let tensors: BTreeMap<String, HostTensor> = tensors
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let metadata: BTreeMap<String, String> =
        [("burnside.format", "init"), ("burnside.version", "1")]
            .into_iter()
            .chain(extra.iter().copied())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let path = std::env::temp_dir().join(format!(
        "burnside-init-{tag}-{}.safetensors",
        std::process::id()
    ));
    crate::write_safetensors(&path, &tensors, &metadata).unwrap();
    let init = InitFile::read(&path);
    std::fs::remove_file(&path).unwrap();
    init
}

mod batch_tests {
    use super::*;

    fn floats(t: Tensor<2>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    fn ints(t: Tensor<1, Int>) -> Vec<i64> {
        t.into_data().iter::<i64>().collect()
    }

    #[test]
    fn full_steps_and_layer_statistics_come_from_the_metadata() {
        let x = || ("inputs.x", HostTensor::from_f32(&[0.5], vec![1, 1]));
        let plain = init_with("plain", &[x()]);
        assert_eq!(plain.full_steps(), None);
        assert!(!plain.layer_statistics());
        let asked = init_with_metadata(
            "asked",
            &[x()],
            &[("full_steps", "[0, 4]"), ("layer_statistics", "true")],
        );
        assert_eq!(asked.full_steps(), Some(vec![0, 4]));
        assert!(asked.layer_statistics());
        assert!(!asked.params_statistics());
        // a forward trace's parameters recorded as statistics: no `params.*` to load
        let forward = init_with_metadata("forward", &[x()], &[("params_statistics", "true")]);
        assert!(forward.params_statistics());
        let layer = burn::nn::LinearConfig::new(1, 1).init(&Device::default());
        let line = forward.load_module(layer).unwrap_err().to_string();
        assert!(
            line.contains("holds no parameters") && line.contains("statistics=False"),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
        for (key, value, says) in [
            ("full_steps", "[-1]", "a JSON list of step indices"),
            ("full_steps", "0,4", "a JSON list of step indices"),
            ("full_steps", "[4, 0]", "ascending"),
            ("layer_statistics", "True", "`true` or `false`"),
            ("params_statistics", "1", "`true` or `false`"),
        ] {
            let error = try_init_with("bad", &[x()], &[(key, value)]).unwrap_err();
            let line = error.to_string();
            assert!(
                line.contains(&format!("metadata `{key}` is `{value}`")) && line.contains(says),
                "{line}"
            );
            assert!(!line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn one_batch_feeds_every_step() {
        let init = init_with(
            "one",
            &[
                ("inputs.x", HostTensor::from_f32(&[0.5, -1.5], vec![1, 2])),
                ("inputs.y", HostTensor::from_i64(&[2], vec![1])),
            ],
        );
        let device = Device::default();
        assert_eq!(init.batches(), 1);
        for step in [0, 1, 7] {
            assert_eq!(
                floats(init.float_input_at::<2>(step, "x", &device).unwrap()),
                vec![0.5, -1.5]
            );
            assert_eq!(
                ints(init.int_input_at::<1>(step, "y", &device).unwrap()),
                vec![2]
            );
        }
    }

    #[test]
    fn a_batch_per_step_is_read_by_step_and_step_0_stays_the_plain_inputs() {
        let init = init_with(
            "per-step",
            &[
                ("inputs.x", HostTensor::from_f32(&[0.5, -1.5], vec![1, 2])),
                ("inputs.y", HostTensor::from_i64(&[2], vec![1])),
                (
                    "step1.inputs.x",
                    HostTensor::from_f32(&[3.0, 4.0], vec![1, 2]),
                ),
                ("step1.inputs.y", HostTensor::from_i64(&[0], vec![1])),
                (
                    "step2.inputs.x",
                    HostTensor::from_f32(&[-0.0, 1e-30], vec![1, 2]),
                ),
                ("step2.inputs.y", HostTensor::from_i64(&[1], vec![1])),
            ],
        );
        let device = Device::default();
        assert_eq!(init.batches(), 3);
        let mut names = init.input_names();
        names.sort();
        assert_eq!(names, vec!["x", "y"]);
        // step 0's batch is the plain `inputs.*`
        assert_eq!(
            floats(init.float_input_at::<2>(0, "x", &device).unwrap()),
            vec![0.5, -1.5]
        );
        assert_eq!(
            floats(init.float_input_at::<2>(1, "x", &device).unwrap()),
            vec![3.0, 4.0]
        );
        let step2 = floats(init.float_input_at::<2>(2, "x", &device).unwrap());
        assert_eq!(step2[0].to_bits(), (-0.0f32).to_bits());
        assert_eq!(step2[1].to_bits(), 1e-30f32.to_bits());
        assert_eq!(
            ints(init.int_input_at::<1>(1, "y", &device).unwrap()),
            vec![0]
        );
        assert_eq!(
            ints(init.int_input_at::<1>(2, "y", &device).unwrap()),
            vec![1]
        );

        let beyond = init
            .float_input_at::<2>(3, "x", &device)
            .unwrap_err()
            .to_string();
        assert!(
            beyond.contains("no batch for step 3: the file holds one batch per step for 3 steps"),
            "{beyond}"
        );
        let unknown = init.input_at(1, "z").unwrap_err().to_string();
        assert!(unknown.contains("no tensor `step1.inputs.z`"), "{unknown}");
        let kind = init
            .int_input_at::<2>(1, "x", &device)
            .unwrap_err()
            .to_string();
        assert!(kind.contains("is a float tensor"), "{kind}");
    }
}
