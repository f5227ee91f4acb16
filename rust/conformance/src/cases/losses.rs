//! burn-nn's losses, each on the input `x` it trains (logits, predictions, the first embedding) and the
//! batch's targets, with the options and reductions of its PyTorch twin (`burnside.conformance.cases.losses`).

use burn::nn::loss::{
    BinaryCrossEntropyLossConfig, CTCLossConfig, CosineEmbeddingLossConfig, CrossEntropyLossConfig,
    GaussianNLLLossConfig, HingeEmbeddingLossConfig, HuberLossConfig, KLDivLossConfig, LpLossConfig,
    MarginRankingLossConfig, MseLoss, MultiMarginLossConfig, PoissonNllLossConfig, Reduction, SmoothL1LossConfig,
    SoftMarginLoss, TripletMarginLossConfig,
};
use burn::tensor::Tensor;
use burn::tensor::activation::{log_softmax, sigmoid, softmax};

use super::Runner;

/// The class weights of the weighted cross-entropy cases (five classes).
const W5: [f32; 5] = [0.5, 1.0, 2.0, 0.25, 1.5];
/// The class weights of the weighted binary cross-entropy case (three classes).
const W3: [f32; 3] = [0.5, 2.0, 1.25];

pub fn cases() -> Vec<(&'static str, Runner)> {
    vec![
        // cross-entropy
        ("cross_entropy/weights", |c| {
            let ce = CrossEntropyLossConfig::new()
                .with_weights(Some(W5.to_vec()))
                .init(&c.device);
            c.loss("cross_entropy", |x: Tensor<2>, step| {
                Ok(ce.forward(x, step.int_input::<1>("y")?))
            })
        }),
        ("cross_entropy/smoothing", |c| {
            let ce = CrossEntropyLossConfig::new().with_smoothing(Some(0.1)).init(&c.device);
            c.loss("cross_entropy", |x: Tensor<2>, step| {
                Ok(ce.forward(x, step.int_input::<1>("y")?))
            })
        }),
        ("cross_entropy/smoothing-weights", |c| {
            let ce = CrossEntropyLossConfig::new()
                .with_weights(Some(W5.to_vec()))
                .with_smoothing(Some(0.2))
                .init(&c.device);
            c.loss("cross_entropy", |x: Tensor<2>, step| {
                Ok(ce.forward(x, step.int_input::<1>("y")?))
            })
        }),
        ("cross_entropy/pad-token", |c| {
            let ce = CrossEntropyLossConfig::new()
                .with_pad_tokens(Some(vec![0]))
                .init(&c.device);
            c.loss("cross_entropy", |x: Tensor<2>, step| {
                Ok(ce.forward(x, step.int_input::<1>("y")?))
            })
        }),
        ("cross_entropy/pad-token-weights", |c| {
            let ce = CrossEntropyLossConfig::new()
                .with_pad_tokens(Some(vec![0]))
                .with_weights(Some(W5.to_vec()))
                .init(&c.device);
            c.loss("cross_entropy", |x: Tensor<2>, step| {
                Ok(ce.forward(x, step.int_input::<1>("y")?))
            })
        }),
        ("cross_entropy/probabilities", |c| {
            let ce = CrossEntropyLossConfig::new().with_logits(false).init(&c.device);
            c.loss("nll_loss", |x: Tensor<2>, step| {
                Ok(ce.forward(softmax(x, 1), step.int_input::<1>("y")?))
            })
        }),
        ("cross_entropy/pad-token-smoothing", |c| {
            let ce = CrossEntropyLossConfig::new()
                .with_pad_tokens(Some(vec![0]))
                .with_smoothing(Some(0.1))
                .init(&c.device);
            c.loss("cross_entropy", |x: Tensor<2>, step| {
                Ok(ce.forward(x, step.int_input::<1>("y")?))
            })
        }),
        ("cross_entropy/two-pad-tokens", |c| {
            let ce = CrossEntropyLossConfig::new()
                .with_pad_tokens(Some(vec![0, 4]))
                .init(&c.device);
            c.loss("cross_entropy", |x: Tensor<2>, step| {
                Ok(ce.forward(x, step.int_input::<1>("y")?))
            })
        }),
        ("cross_entropy/probabilities-pad-token", |c| {
            let ce = CrossEntropyLossConfig::new()
                .with_logits(false)
                .with_pad_tokens(Some(vec![0]))
                .init(&c.device);
            c.loss("nll_loss", |x: Tensor<2>, step| {
                Ok(ce.forward(softmax(x, 1), step.int_input::<1>("y")?))
            })
        }),
        // binary cross-entropy
        ("binary_cross_entropy/logits", |c| {
            let bce = BinaryCrossEntropyLossConfig::new().with_logits(true).init(&c.device);
            c.loss("binary_cross_entropy_with_logits", |x: Tensor<2>, step| {
                Ok(bce.forward(x, step.int_input::<2>("y")?))
            })
        }),
        ("binary_cross_entropy/default", |c| {
            let bce = BinaryCrossEntropyLossConfig::new().init(&c.device);
            c.loss("binary_cross_entropy", |x: Tensor<2>, step| {
                Ok(bce.forward(sigmoid(x), step.int_input::<2>("y")?))
            })
        }),
        ("binary_cross_entropy/logits-weights", |c| {
            let bce = BinaryCrossEntropyLossConfig::new()
                .with_logits(true)
                .with_weights(Some(W3.to_vec()))
                .init(&c.device);
            c.loss("binary_cross_entropy_with_logits", |x: Tensor<2>, step| {
                Ok(bce.forward(x, step.int_input::<2>("y")?))
            })
        }),
        ("binary_cross_entropy/probabilities-weights-1d", |c| {
            let bce = BinaryCrossEntropyLossConfig::new()
                .with_weights(Some(vec![0.4, 1.6]))
                .init(&c.device);
            c.loss("binary_cross_entropy", |x: Tensor<1>, step| {
                Ok(bce.forward(sigmoid(x), step.int_input::<1>("y")?))
            })
        }),
        ("binary_cross_entropy/logits-smoothing", |c| {
            let bce = BinaryCrossEntropyLossConfig::new()
                .with_logits(true)
                .with_smoothing(Some(0.2))
                .init(&c.device);
            c.loss("binary_cross_entropy_with_logits", |x: Tensor<2>, step| {
                Ok(bce.forward(x, step.int_input::<2>("y")?))
            })
        }),
        // regression
        ("mse_loss/mean", |c| {
            c.loss("mse_loss", |x: Tensor<2>, step| {
                Ok(MseLoss::new().forward(x, step.float_input("target")?, Reduction::Mean))
            })
        }),
        ("mse_loss/sum", |c| {
            c.loss("mse_loss", |x: Tensor<2>, step| {
                Ok(MseLoss::new().forward(x, step.float_input("target")?, Reduction::Sum))
            })
        }),
        ("mse_loss/none-summed", |c| {
            c.loss("mse_loss", |x: Tensor<3>, step| {
                Ok(MseLoss::new()
                    .forward_no_reduction(x, step.float_input("target")?)
                    .sum())
            })
        }),
        ("huber_loss/delta-1", |c| {
            let huber = HuberLossConfig::new(1.0).init();
            c.loss("huber_loss", |x: Tensor<2>, step| {
                Ok(huber.forward(x, step.float_input("target")?, Reduction::Mean))
            })
        }),
        ("huber_loss/delta-0.5-sum", |c| {
            let huber = HuberLossConfig::new(0.5).init();
            c.loss("huber_loss", |x: Tensor<2>, step| {
                Ok(huber.forward(x, step.float_input("target")?, Reduction::Sum))
            })
        }),
        ("smooth_l1_loss/default", |c| {
            let loss = SmoothL1LossConfig::new().init();
            c.loss("smooth_l1_loss", |x: Tensor<2>, step| {
                Ok(loss.forward_with_reduction(x, step.float_input("target")?, Reduction::Auto))
            })
        }),
        ("smooth_l1_loss/beta-0.5-sum", |c| {
            let loss = SmoothL1LossConfig::new().with_beta(0.5).init();
            c.loss("smooth_l1_loss", |x: Tensor<2>, step| {
                Ok(loss.forward_with_reduction(x, step.float_input("target")?, Reduction::Sum))
            })
        }),
        ("l1_loss/mean", |c| {
            c.loss("l1_loss", |x: Tensor<2>, step| {
                Ok(LpLossConfig::l1().forward(x, step.float_input("target")?, Reduction::Mean))
            })
        }),
        ("l1_loss/sum", |c| {
            c.loss("l1_loss", |x: Tensor<2>, step| {
                Ok(LpLossConfig::l1().forward(x, step.float_input("target")?, Reduction::Sum))
            })
        }),
        ("lp_loss/p2", |c| {
            c.loss("mse_loss", |x: Tensor<2>, step| {
                Ok(LpLossConfig::l2().forward(x, step.float_input("target")?, Reduction::Mean))
            })
        }),
        ("lp_loss/p3-sum", |c| {
            let lp = LpLossConfig::new(3.0).init();
            c.loss("lp_loss", |x: Tensor<2>, step| {
                Ok(lp.forward(x, step.float_input("target")?, Reduction::Sum))
            })
        }),
        // KL divergence (on log_softmax(x), as PyTorch's twin)
        ("kl_div/batchmean", |c| kl(c, false, Reduction::BatchMean)),
        ("kl_div/mean", |c| kl(c, false, Reduction::Mean)),
        ("kl_div/sum", |c| kl(c, false, Reduction::Sum)),
        ("kl_div/log-target", |c| kl(c, true, Reduction::BatchMean)),
        ("kl_div/default", |c| {
            let loss = KLDivLossConfig::new().init();
            c.loss("kl_div", |x: Tensor<2>, step| {
                Ok(loss.forward(log_softmax(x, 1), step.float_input("target")?, Reduction::Auto))
            })
        }),
        // likelihoods
        ("poisson_nll_loss/default", |c| {
            let loss = PoissonNllLossConfig::new().init();
            c.loss("poisson_nll_loss", |x: Tensor<2>, step| {
                Ok(loss.forward(x, step.float_input("target")?, Reduction::Auto))
            })
        }),
        ("poisson_nll_loss/full-sum", |c| {
            let loss = PoissonNllLossConfig::new().with_full(true).init();
            c.loss("poisson_nll_loss", |x: Tensor<2>, step| {
                Ok(loss.forward(x, step.float_input("target")?, Reduction::Sum))
            })
        }),
        ("poisson_nll_loss/rates", |c| {
            let loss = PoissonNllLossConfig::new().with_log_input(false).init();
            c.loss("poisson_nll_loss", |x: Tensor<2>, step| {
                Ok(loss.forward(x.exp(), step.float_input("target")?, Reduction::Mean))
            })
        }),
        ("gaussian_nll_loss/default", |c| {
            let loss = GaussianNLLLossConfig::new().init();
            c.loss("gaussian_nll_loss", |x: Tensor<2>, step| {
                let (target, var) = (step.float_input("target")?, step.float_input("var")?);
                Ok(loss.forward(x, target, var, Reduction::Auto))
            })
        }),
        ("gaussian_nll_loss/full-sum", |c| {
            let loss = GaussianNLLLossConfig::new().with_full(true).init();
            c.loss("gaussian_nll_loss", |x: Tensor<2>, step| {
                let (target, var) = (step.float_input("target")?, step.float_input("var")?);
                Ok(loss.forward(x, target, var, Reduction::Sum))
            })
        }),
        // embeddings and margins
        ("cosine_embedding_loss/default", |c| {
            let loss = CosineEmbeddingLossConfig::new().init();
            c.loss("cosine_embedding_loss", |x: Tensor<2>, step| {
                Ok(loss.forward(x, step.float_input("other")?, step.int_input("y")?))
            })
        }),
        ("cosine_embedding_loss/margin-0.3-sum", |c| {
            let loss = CosineEmbeddingLossConfig::new()
                .with_margin(0.3)
                .with_reduction(Reduction::Sum)
                .init();
            c.loss("cosine_embedding_loss", |x: Tensor<2>, step| {
                Ok(loss.forward(x, step.float_input("other")?, step.int_input("y")?))
            })
        }),
        ("hinge_embedding_loss/default", |c| {
            let loss = HingeEmbeddingLossConfig::new().init();
            c.loss("hinge_embedding_loss", |x: Tensor<2>, step| {
                Ok(loss.forward(x, step.float_input("y")?, Reduction::Auto))
            })
        }),
        ("hinge_embedding_loss/margin-0.5-sum", |c| {
            let loss = HingeEmbeddingLossConfig::new().with_margin(0.5).init();
            c.loss("hinge_embedding_loss", |x: Tensor<2>, step| {
                Ok(loss.forward(x, step.float_input("y")?, Reduction::Sum))
            })
        }),
        ("margin_ranking_loss/default", |c| {
            let loss = MarginRankingLossConfig::new().init();
            c.loss("margin_ranking_loss", |x: Tensor<1>, step| {
                Ok(loss.forward(x, step.float_input("other")?, step.float_input("y")?, Reduction::Auto))
            })
        }),
        ("margin_ranking_loss/margin-0.5-sum", |c| {
            let loss = MarginRankingLossConfig::new().with_margin(0.5).init();
            c.loss("margin_ranking_loss", |x: Tensor<2>, step| {
                Ok(loss.forward(x, step.float_input("other")?, step.float_input("y")?, Reduction::Sum))
            })
        }),
        ("multi_margin_loss/default", |c| {
            let loss = MultiMarginLossConfig::new().init();
            c.loss("multi_margin_loss", |x: Tensor<2>, step| {
                Ok(loss.forward(x, step.int_input("y")?, Reduction::Auto))
            })
        }),
        ("multi_margin_loss/p2-margin-0.5-sum", |c| {
            let loss = MultiMarginLossConfig::new().with_p(2).with_margin(0.5).init();
            c.loss("multi_margin_loss", |x: Tensor<2>, step| {
                Ok(loss.forward(x, step.int_input("y")?, Reduction::Sum))
            })
        }),
        ("soft_margin_loss/default", |c| {
            c.loss("soft_margin_loss", |x: Tensor<2>, step| {
                Ok(SoftMarginLoss::new().forward(x, step.float_input("y")?, Reduction::Auto))
            })
        }),
        ("soft_margin_loss/sum", |c| {
            c.loss("soft_margin_loss", |x: Tensor<2>, step| {
                Ok(SoftMarginLoss::new().forward(x, step.float_input("y")?, Reduction::Sum))
            })
        }),
        ("triplet_margin_loss/default", |c| {
            let loss = TripletMarginLossConfig::new().init();
            c.loss("triplet_margin_loss", |x: Tensor<2>, step| {
                let (positive, negative) = (step.float_input("positive")?, step.float_input("negative")?);
                Ok(loss.forward(x, positive, negative, Reduction::Auto))
            })
        }),
        ("triplet_margin_loss/p1-margin-2-sum", |c| {
            let loss = TripletMarginLossConfig::new().with_p(1.0).with_margin(2.0).init();
            c.loss("triplet_margin_loss", |x: Tensor<2>, step| {
                let (positive, negative) = (step.float_input("positive")?, step.float_input("negative")?);
                Ok(loss.forward(x, positive, negative, Reduction::Sum))
            })
        }),
        ("triplet_margin_loss/anchor-is-positive", |c| {
            let loss = TripletMarginLossConfig::new().init();
            c.loss("triplet_margin_loss", |x: Tensor<2>, step| {
                let (positive, negative) = (step.float_input::<2>("positive")?, step.float_input("negative")?);
                // burn's `slice` takes one range per sliced dimension: `[0..1]` is the first axis's
                #[allow(clippy::single_range_in_vec_init)]
                let positive = Tensor::cat(vec![x.clone().slice([0..1]).detach(), positive.slice([1..4])], 0);
                Ok(loss.forward(x, positive, negative, Reduction::Auto))
            })
        }),
        // CTC (on log_softmax(x) over the classes of [time, batch, class])
        ("ctc_loss/default", |c| ctc(c, 0, false, Reduction::Auto)),
        ("ctc_loss/blank-4-sum", |c| ctc(c, 4, false, Reduction::Sum)),
        ("ctc_loss/zero-infinity", |c| ctc(c, 0, true, Reduction::Mean)),
    ]
}

/// `CTCLoss` on `log_softmax(x, 2)` against the batch's padded `targets` and their lengths.
fn ctc(c: &crate::harness::Case, blank: usize, zero_infinity: bool, reduction: Reduction) -> crate::harness::Res<()> {
    let loss = CTCLossConfig::new()
        .with_blank(blank)
        .with_zero_infinity(zero_infinity)
        .init();
    c.loss("ctc_loss", |x: Tensor<3>, step| {
        let targets = step.int_input::<2>("targets")?;
        let (inputs, lengths) = (
            step.int_input::<1>("input_lengths")?,
            step.int_input::<1>("target_lengths")?,
        );
        Ok(loss.forward_with_reduction(log_softmax(x, 2), targets, inputs, lengths, reduction.clone()))
    })
}

/// `KLDivLoss` on `log_softmax(x)` against the batch's `target` (probabilities, or log-probabilities).
fn kl(c: &crate::harness::Case, log_target: bool, reduction: Reduction) -> crate::harness::Res<()> {
    let loss = KLDivLossConfig::new().with_log_target(log_target).init();
    c.loss("kl_div", |x: Tensor<2>, step| {
        Ok(loss.forward(log_softmax(x, 1), step.float_input("target")?, reduction.clone()))
    })
}
