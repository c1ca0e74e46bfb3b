// The help line of every TrainConfig key (config_help.h).
#include "trainer/config_help.h"

#include <map>

namespace ringlet::trainer {

const std::string& config_key_help(const std::string& key) {
  static const std::map<std::string, std::string> help = {
      {"model", "fmnist_cnn | resnet20 | resnet18 (fmnist_cnn takes 28x28 grey images only)"},
      {"dataset", "fashion-mnist | mnist | cifar10 (below)"},
      {"data_dir", "the directory holding the dataset's files"},
      {"epochs", "passes over the training split, >= 1"},
      {"nproc", "local ranks this command starts (DDP), 1-256"},
      {"max_restarts", "with nproc > 1: restart every rank after a failure, resuming, 0-100"},
      {"sync_bn", "true | false: BatchNorm over the global batch (SyncBatchNorm)"},
      {"comm_hook",
       "none | fp16_compress | bf16_compress: DDP all-reduces each gradient bucket in half "
       "precision (half the bytes), as PyTorch's comm hooks"},
      {"batch_size", "examples per rank per step, >= 1 (global batch: nproc x batch_size)"},
      {"optimizer", "sgd | adam | adamw"},
      {"lr", "learning rate, > 0"},
      {"momentum", "sgd's momentum, in [0, 1)"},
      {"weight_decay", ">= 0: L2 for sgd and adam, decoupled for adamw"},
      {"nesterov", "true | false: Nesterov momentum (sgd, momentum > 0)"},
      {"schedule", "none | step | cosine: the lr per epoch"},
      {"step_size", "step: epochs between decays, >= 1"},
      {"gamma", "step: the lr's factor at each decay, > 0"},
      {"warmup_epochs", "epochs of linear warmup from lr/10, 0 to epochs-1"},
      {"label_smoothing", "cross-entropy label smoothing, in [0, 1)"},
      {"clip_grad_norm", "clip the gradients' total 2-norm to this, > 0; 0 = off"},
      {"precision", "f32 | bf16 | f16 (mixed precision; f16 scales the loss)"},
      {"device", "cpu | emu[:N] | cuda[:N]: where the model computes"},
      {"deterministic",
       "auto | on | off: on a device, on runs each op as the CPU decomposes it (the emulated "
       "device then trains bit for bit as the CPU); off, the fast path: one batched GEMM per "
       "convolution pass, cuDNN and tensor cores where enabled on a GPU; auto: on for emu, off "
       "for cuda"},
      {"allow_tf32",
       "true | false: on a GPU, f32 GEMMs and convolutions on tensor cores in TF32 (10-bit "
       "mantissas, f32 accumulation); bf16/f16 autocast uses them either way"},
      {"cuda_graph",
       "auto | on | off: capture the training step as one graph after 3 eager steps and replay "
       "it (sgd, f32 or bf16, one rank, no clipping or tracing); auto: on a GPU when it can"},
      {"seed", "the model's initialization (as torch.manual_seed), shuffling, augmentation"},
      {"workers", "data loader threads, 0-64"},
      {"threads", "compute threads per rank, 0-1024; 0 = the cores shared among local ranks"},
      {"mean", "input normalization: one value, or one per channel (0.5,0.5,0.5)"},
      {"std", "as mean, each > 0"},
      {"augment", "training augmentation: any of crop, flip, erase, comma-separated; none"},
      {"crop_padding", "pixels of black padding for crop, 0 to half the image side"},
      {"tta",
       "none | flip: test-time augmentation (flip: mean of an image's and its mirror's "
       "logits)"},
      {"limit_train", "only the first N training examples, >= 0; 0 = all"},
      {"limit_test", "only the first N test examples, >= 0; 0 = all"},
      {"out", "the run directory; default runs/<date-time>"},
      {"resume", "true | false: continue the run in out from its checkpoint"},
      {"reset", "true | false: discard out's run and start over"},
      {"resume_from", "a run directory to fork: a new run in out from its checkpoint"},
      {"log_every", "steps between progress lines and steps.jsonl records, >= 1"},
      {"trace_steps",
       "trace the first N steps of this command into out/trace (collective steps, forward, "
       "backward per op, optimizer, DDP buckets) for `ringlet trace report` and `ringlet "
       "report`; 0 = off, at most 100000"},
  };
  static const std::string none;
  const auto it = help.find(key);
  return it == help.end() ? none : it->second;
}

}  // namespace ringlet::trainer
