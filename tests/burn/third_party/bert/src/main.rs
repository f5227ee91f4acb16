//! The burnside port of the crate's BERT: the `save_pretrained` directory loaded by the crate's
//! own loader, the forward passes of the batches PyTorch ran recorded by burnside-trace, with
//! both of the model's outputs under Hugging Face's names.
//!
//! ```text
//! bert-port --init INIT -o OUT [--batches N] --checkpoint DIR
//! ```

use burn::tensor::Device;
use burnside_trace::{Inference, InitFile, PortArgs, UsageError};

fn main() {
    burnside_trace::run_port("bert-port", |mut args: PortArgs| {
        let checkpoint = args.value("--checkpoint")?.ok_or_else(|| {
            UsageError("missing --checkpoint DIR (save_pretrained's directory)".into())
        })?;
        args.finish()?;
        let device = Device::default();
        let init = InitFile::read(&args.init)?;
        let model = bert_burn::loader::from_pretrained(&checkpoint, &device)?;
        Inference::new().run(&args, &init, &device, &model, |model, batch| {
            let input_ids = batch.int_input::<2>("input_ids")?;
            let token_type_ids = batch.int_input::<2>("token_type_ids")?;
            let attention_mask = batch.int_input::<2>("attention_mask")?;
            let out = model.forward(input_ids, token_type_ids, attention_mask);
            batch.output("last_hidden_state", &out.last_hidden_state)?;
            batch.output("pooler_output", &out.pooler_output)?;
            Ok(out.last_hidden_state)
        })?;
        Ok(())
    });
}
