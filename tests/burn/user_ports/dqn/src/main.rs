//! The burn port of model.py's DQN update: the online Q-network trained with RMSprop on the SmoothL1 TD
//! loss, the TD target from a frozen target network loaded with the online network's starting weights.
//! `--bug huber-half|rmsprop-defaults|no-done-mask|online-target|target-trained` builds a porting slip in.

use burn::module::Module;
use burn::nn::loss::{HuberLossConfig, Reduction};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Tap, TraceError, Training};

const OBS: usize = 8;
const ACTIONS: usize = 4;
const HIDDEN: usize = 32;
const GAMMA: f32 = 0.99;

#[derive(Module, Debug)]
struct QNet {
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
}

impl QNet {
    fn new(device: &Device) -> Self {
        Self {
            fc1: LinearConfig::new(OBS, HIDDEN).init(device),
            fc2: LinearConfig::new(HIDDEN, HIDDEN).init(device),
            fc3: LinearConfig::new(HIDDEN, ACTIONS).init(device),
        }
    }

    fn forward(&self, obs: Tensor<2>, mut tap: Tap) -> Result<Tensor<2>, TraceError> {
        let x = self.fc1.forward(obs);
        tap.activation("fc1", &x)?;
        let x = relu(x);
        tap.activation("act1", &x)?;
        let x = self.fc2.forward(x);
        tap.activation("fc2", &x)?;
        let x = relu(x);
        tap.activation("act2", &x)?;
        let x = self.fc3.forward(x);
        tap.activation("fc3", &x)?;
        Ok(x)
    }
}

/// `--bug target-trained`: the target network made part of the trained module (its fields beside the
/// online network's), neither frozen nor detached, so the optimizer steps it too.
#[derive(Module, Debug)]
struct WithTarget {
    fc1: Linear,
    fc2: Linear,
    fc3: Linear,
    target: QNet,
}

impl WithTarget {
    fn online(&self) -> QNet {
        QNet { fc1: self.fc1.clone(), fc2: self.fc2.clone(), fc3: self.fc3.clone() }
    }
}

fn main() {
    burnside_trace::run_port("user_dqn", |mut args: PortArgs| {
        let bug = args.value("--bug")?;
        args.finish()?;
        let bug = bug.as_deref();
        let device = Device::default().autodiff();
        let init = InitFile::read(&args.init)?;
        let online = init.load_module(QNet::new(&device))?;
        // the target network starts as a copy of the online one: its own module from the same weights, frozen
        let target = init.load_module(QNet::new(&device))?.no_grad();
        let huber = HuberLossConfig::new(if bug == Some("huber-half") { 0.5 } else { 1.0 }).init();
        // torch.optim.RMSprop(lr=1e-3) with PyTorch's defaults (alpha 0.99, eps 1e-8, no momentum); the slip
        // takes burn's RmsPropConfig::new() defaults instead (momentum 0.9, epsilon 1e-5)
        let spec = if bug == Some("rmsprop-defaults") {
            OptimizerSpec::rmsprop(1e-3).with_momentum(0.9).with_eps(1e-5)
        } else {
            OptimizerSpec::rmsprop(1e-3)
        };
        let training = Training::new(spec).with_loss_fn("TDLoss");
        // reward + gamma * max_a next_q * (1 - done), the loss of Q(obs, action) against it
        let td_loss = move |q: Tensor<2>, action: Tensor<1, burn::tensor::Int>, reward: Tensor<1>, next_q: Tensor<2>,
                            done: Tensor<1>| {
            let q_taken = q.gather(1, action.unsqueeze_dim::<2>(1)).squeeze_dim::<1>(1);
            let next_max = next_q.max_dim(1).squeeze_dim::<1>(1);
            let td_target = if bug == Some("no-done-mask") {
                reward + next_max * GAMMA
            } else {
                reward + next_max * GAMMA * (done.neg() + 1.0)
            };
            huber.forward(q_taken, td_target, Reduction::Mean)
        };
        if bug == Some("target-trained") {
            let model = WithTarget { fc1: online.fc1, fc2: online.fc2, fc3: online.fc3, target: init.load_module(QNet::new(&device))? };
            training.run(&args, &init, &device, model, |model, step| {
                let obs = step.float_input::<2>("obs")?;
                let action = step.int_input::<1>("action")?;
                let reward = step.float_input::<1>("reward")?;
                let next_obs = step.float_input::<2>("next_obs")?;
                let done = step.float_input::<1>("done")?;
                let q = model.online().forward(obs, step.tap())?;
                let next_q = model.target.forward(next_obs, Tap::off())?;
                let loss = td_loss(q.clone(), action, reward, next_q, done);
                Ok((q, loss))
            })?;
            return Ok(());
        }
        training.run(&args, &init, &device, online, |model, step| {
            let obs = step.float_input::<2>("obs")?;
            let action = step.int_input::<1>("action")?;
            let reward = step.float_input::<1>("reward")?;
            let next_obs = step.float_input::<2>("next_obs")?;
            let done = step.float_input::<1>("done")?;
            let q = model.forward(obs, step.tap())?;
            // as PyTorch's `with torch.no_grad(): target(next_obs)`; the slip reads the online network
            let next_q = if bug == Some("online-target") {
                model.forward(next_obs, Tap::off())?.detach()
            } else {
                target.forward(next_obs, Tap::off())?.detach()
            };
            let loss = td_loss(q.clone(), action, reward, next_q, done);
            Ok((q, loss))
        })?;
        Ok(())
    });
}
