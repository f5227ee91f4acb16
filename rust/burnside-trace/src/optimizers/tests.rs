use super::*;

#[test]
fn adam_json_uses_pytorch_names_and_the_decimal_eps() {
    let json = OptimizerSpec::adam(0.01).to_json();
    assert_eq!(json["name"], "adam");
    assert_eq!(json["eps"], 1e-8);
    assert_eq!(json["betas"], json!([0.9, 0.999]));
    assert_eq!(json["weight_decay_kind"], "l2");
}

#[test]
fn momentum_with_weight_decay_reads_like_torch_optim_sgd() {
    let json = OptimizerSpec::sgd_momentum(0.1, 0.9)
        .with_weight_decay(1e-4)
        .to_json();
    assert_eq!(
        json,
        json!({"name": "sgd", "lr": 0.1, "momentum": 0.9, "dampening": 0.0,
        "nesterov": false, "weight_decay": 1e-4, "weight_decay_kind": "l2"})
    );
    let decoupled = OptimizerSpec::adamw(0.01).with_weight_decay(0.05).to_json();
    assert_eq!(decoupled["weight_decay"], 0.05);
    assert_eq!(decoupled["weight_decay_kind"], "decoupled");
}

#[test]
fn every_pytorch_setting_has_a_builder() {
    let adam = OptimizerSpec::adam(0.01)
        .with_betas(0.8, 0.99)
        .with_eps(1e-6)
        .with_amsgrad(true)
        .with_weight_decay(0.1)
        .with_lr(0.02);
    assert_eq!(
        adam,
        OptimizerSpec::Adam {
            lr: 0.02,
            betas: (0.8, 0.99),
            eps: 1e-6,
            weight_decay: 0.1,
            amsgrad: true
        }
    );
    let sgd = OptimizerSpec::sgd(0.1)
        .with_momentum(0.9)
        .with_dampening(0.1)
        .with_nesterov(true);
    assert_eq!(
        sgd.to_json(),
        json!({"name": "sgd", "lr": 0.1, "momentum": 0.9, "dampening": 0.1,
        "nesterov": true, "weight_decay": 0.0, "weight_decay_kind": "l2"})
    );
    assert!(sgd.has_state() && !OptimizerSpec::sgd(0.1).has_state());
    assert_eq!(
        sgd.with_momentum(0.0),
        OptimizerSpec::Sgd {
            lr: 0.1,
            momentum: None,
            dampening: 0.1,
            nesterov: true,
            weight_decay: 0.0
        }
    );
}

#[test]
#[should_panic(expected = "SGD has no betas")]
fn a_setting_the_optimizer_does_not_have_is_refused() {
    let _ = OptimizerSpec::sgd(0.1).with_betas(0.9, 0.99);
}

#[test]
fn rmsprop_and_adagrad_take_pytorchs_defaults_and_read_like_torch_optim() {
    assert_eq!(
        OptimizerSpec::rmsprop(0.01).to_json(),
        json!({"name": "rmsprop", "lr": 0.01, "alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0,
        "weight_decay_kind": "l2", "momentum": 0.0, "centered": false})
    );
    assert_eq!(
        OptimizerSpec::adagrad(0.01).to_json(),
        json!({"name": "adagrad", "lr": 0.01, "lr_decay": 0.0, "weight_decay": 0.0,
        "weight_decay_kind": "l2", "initial_accumulator_value": 0.0, "eps": 1e-10})
    );
    let rmsprop = OptimizerSpec::rmsprop(0.01)
        .with_alpha(0.9)
        .with_eps(1e-6)
        .with_momentum(0.5)
        .with_centered(true)
        .with_weight_decay(0.1);
    assert_eq!(
        rmsprop,
        OptimizerSpec::RmsProp {
            lr: 0.01,
            alpha: 0.9,
            eps: 1e-6,
            weight_decay: 0.1,
            momentum: 0.5,
            centered: true
        }
    );
    let adagrad = OptimizerSpec::adagrad(0.01)
        .with_lr_decay(0.1)
        .with_eps(1e-8)
        .with_initial_accumulator_value(0.0)
        .unwrap();
    assert_eq!(
        adagrad,
        OptimizerSpec::AdaGrad {
            lr: 0.01,
            lr_decay: 0.1,
            weight_decay: 0.0,
            eps: 1e-8
        }
    );
    assert!(rmsprop.has_state() && adagrad.has_state());
}

#[test]
fn an_adagrad_initial_accumulator_burn_cannot_start_from_is_one_error_naming_it() {
    let error = OptimizerSpec::adagrad(0.01)
        .with_initial_accumulator_value(0.1)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(
            "Adagrad initial_accumulator_value=0.1: burn's AdaGrad has no counterpart"
        ),
        "{error}"
    );
    assert!(!error.contains('\n'));
}

#[test]
#[should_panic(expected = "only RMSprop has alpha, not Adagrad")]
fn rmsprops_alpha_on_adagrad_is_refused() {
    let _ = OptimizerSpec::adagrad(0.01).with_alpha(0.9);
}

#[test]
fn adafactor_muon_and_lbfgs_take_pytorchs_defaults_and_read_like_torch_optim() {
    assert_eq!(
        OptimizerSpec::adafactor(0.01).to_json(),
        json!({"name": "adafactor", "lr": 0.01, "beta2_decay": -0.8,
        "eps1": f64::from(f32::EPSILON), "eps2": 1e-3, "d": 1.0, "weight_decay": 0.0,
        "weight_decay_kind": "decoupled", "relative_step": true, "scale_parameter": true,
        "maximize": false})
    );
    assert_eq!(
        OptimizerSpec::muon(0.001).to_json(),
        json!({"name": "muon", "lr": 0.001, "weight_decay": 0.1, "weight_decay_kind": "decoupled",
        "momentum": 0.95, "nesterov": true, "ns_coefficients": [3.4445, -4.775, 2.0315],
        "eps": 1e-7, "ns_steps": 5, "adjust_lr_fn": "original"})
    );
    assert_eq!(
        OptimizerSpec::lbfgs(1.0).to_json(),
        json!({"name": "lbfgs", "lr": 1.0, "max_iter": 20, "max_eval": 25,
        "tolerance_grad": 1e-7, "tolerance_change": 1e-9, "history_size": 100,
        "line_search_fn": null, "maximize": false})
    );
    let lbfgs = OptimizerSpec::lbfgs(1.0).with_lbfgs(8, None, 10, true);
    assert_eq!(lbfgs.to_json()["max_eval"], 10);
    assert_eq!(lbfgs.to_json()["line_search_fn"], "strong_wolfe");
    assert!(lbfgs.init_lbfgs().is_some() && OptimizerSpec::muon(0.1).init_lbfgs().is_none());
    assert!(!lbfgs.has_state() && OptimizerSpec::muon(0.1).has_state());
}

#[test]
fn muons_buffer_is_recorded_as_pytorchs_moving_average() {
    let sum = crate::HostTensor::from_f32(&[2.0, -4.0], vec![2]);
    let spec = OptimizerSpec::muon(0.02).with_momentum(0.75);
    let recorded = spec.torch_state("momentum_buffer", sum.clone());
    assert_eq!(recorded.to_f32().unwrap(), vec![0.5, -1.0]);
    assert_eq!(recorded.shape, vec![2]);
    assert_eq!(spec.torch_state("step", sum.clone()), sum);
    let sgd = OptimizerSpec::sgd_momentum(0.1, 0.75);
    assert_eq!(sgd.torch_state("momentum_buffer", sum.clone()), sum);
}

#[test]
fn a_muon_lr_adjustment_burn_does_not_have_is_one_error_naming_it() {
    let error = OptimizerSpec::muon(0.02)
        .with_muon(
            true,
            (3.4445, -4.775, 2.0315),
            1e-7,
            5,
            "spectral_unclamped",
        )
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("Muon adjust_lr_fn=\"spectral_unclamped\": burn's Muon has"),
        "{error}"
    );
    assert!(!error.contains('\n'));
}

#[test]
fn plain_sgd_json_has_no_momentum() {
    let json = OptimizerSpec::sgd(0.1).to_json();
    assert_eq!(
        json,
        json!({"name": "sgd", "lr": 0.1, "momentum": 0.0, "dampening": 0.0,
        "nesterov": false, "weight_decay": 0.0, "weight_decay_kind": "l2"})
    );
}
