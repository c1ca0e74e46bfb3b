// TrainConfig: every setting of a training run, with the defaults of the reference recipe
// (fmnist_cnn, batch 64, SGD lr 0.05 momentum 0.9 weight decay 5e-4, 3 epochs, no
// augmentation). It is read from a JSON file (comments allowed, as in recipes/), then
// command-line overrides (--epochs 3, --lr=0.1) are applied; an unknown key or flag is an error
// naming it and the nearest valid one. The resolved config is printed and saved with the run.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ringlet::trainer {

struct TrainConfig {
  std::string model = "fmnist_cnn";
  std::string dataset = "fashion-mnist";  // fashion-mnist | mnist | cifar10 (needs data_dir)
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 3;
  int nproc = 1;                   // local ranks (`ringlet train --nproc 2` launches them itself)
  int max_restarts = 0;            // with nproc > 1: restart all ranks after a failure, resuming
  bool sync_bn = false;            // several ranks: BatchNorm over the global batch (SyncBatchNorm)
  std::string comm_hook = "none";  // several ranks: none | fp16_compress | bf16_compress (ddp.h)
  int batch_size = 64;             // per rank
  std::string optimizer = "sgd";   // sgd | adam | adamw
  double lr = 0.05;
  double momentum = 0.9;
  double weight_decay = 5e-4;
  bool nesterov = false;
  std::string schedule = "none";  // none | step | cosine
  int step_size = 1;              // epochs per decay (step)
  double gamma = 0.1;             // decay factor (step)
  int warmup_epochs = 0;
  double label_smoothing = 0.0;
  double clip_grad_norm = 0.0;  // 0 = off
  // f32 | bf16 | f16: Linear and Conv2d compute on values rounded to bf16/f16 with f32
  // accumulation and f32 master weights (nn/autocast.h); f16 scales the loss (nn::GradScaler)
  // and skips steps whose gradients overflow.
  std::string precision = "f32";
  std::uint64_t seed = 0;
  // cpu | emu[:N] | cuda[:N]: where the model computes; with nproc > 1 each rank takes the
  // device (local rank % count), DDP and SyncBatchNorm included.
  std::string device = "cpu";
  // auto | on | off, on a device: on runs every op as the CPU decomposes it (the emulated device
  // then trains bit for bit as the CPU); off takes the fast path (tensor/determinism.h); auto is
  // on for the emulated device (whose runs exist to match the CPU's), off for a GPU.
  std::string deterministic = "auto";
  // The setting `deterministic` resolves to on `device`.
  bool deterministic_on(const std::string& device_text) const;
  // auto | on | off: the training step captured as one graph after a warm-up and replayed
  // (trainer/step_graph.h); auto captures on a GPU when the step can be.
  std::string cuda_graph = "auto";
  // On a GPU: f32 GEMMs and convolutions on tensor cores in TF32 (tensor/math_mode.h).
  bool allow_tf32 = false;
  int workers = 2;  // data loader threads
  int threads = 0;  // compute threads; 0 = RINGLET_NUM_THREADS / all cores
  // Input normalization: one value per channel, or one for every channel; empty means the
  // dataset's (trainer/dataset_catalog.cpp; Fashion-MNIST 0.2860 / 0.3530). In JSON a
  // number or a list, on the command line "--mean 0.5" or "--mean 0.49,0.48,0.45".
  std::vector<double> mean;
  std::vector<double> std;
  // Augmentation of the training split (never the test split), drawn per (seed, epoch, dataset
  // index): "" (none), "crop", "flip" or "crop,flip". crop is torchvision's RandomCrop(side,
  // padding=crop_padding) with black padding, flip its RandomHorizontalFlip(0.5); both act on
  // the raw pixels, before the scaling to [0, 1] and the normalization.
  std::string augment;
  // Pixels of padding on each side for crop; unset (null) means the dataset's: 2 for the 28x28
  // images of (Fashion-)MNIST, 4 for CIFAR-10 (torchvision's RandomCrop(32, padding=4)).
  std::optional<int> crop_padding;
  // Test-time augmentation of the evaluation: "" (none) or "flip": each test image's logits are
  // the mean of the image's and its mirror image's (for models trained with flip).
  std::string tta;
  std::int64_t limit_train = 0;  // use only the first N training examples (0 = all)
  std::int64_t limit_test = 0;
  std::string out;  // run directory; empty = runs/<date-time>
  // continue the run in out from its checkpoint, with its recipe (trainer/run_dir.h)
  bool resume = false;
  bool reset = false;       // delete out's checkpoint and metrics and start over
  std::string resume_from;  // a fork: a new run in out, starting from this run's checkpoint
  int log_every = 50;       // steps between progress lines when not on a TTY
  int trace_steps = 0;      // trace the first N steps into out/trace (trainer/step_trace.h)

  nlohmann::json to_json() const;
  // Applies the keys of `json` (all optional); unknown keys and wrong types are errors.
  void merge_json(const nlohmann::json& json, const std::string& source);
  // Applies "--key value" / "--key=value" / "--flag" overrides; returns arguments that are
  // not config keys (for the command to interpret) only if `allowed_extra` lists them.
  void apply_overrides(const std::vector<std::string>& args,
                       const std::vector<std::string>& allowed_extra = {});
  // Ranges (epochs >= 1, batch_size >= 1, lr > 0, ...), a known dataset with the files it
  // needs, a model that takes its images, mean/std with one value or one per channel.
  void validate() const;
  // Sets a mean, std or crop_padding left unset to the dataset's, and the default data_dir to
  // the dataset's own default directory (MNIST's), after validate(), so that the printed and
  // saved config says what the run used.
  void fill_dataset_defaults();
};

// The augmentations a config's `augment` names. They always apply in this order (crop, then
// flip), whatever the order of the list, so that a run draws the same random numbers.
struct Augmentations {
  bool crop = false;
  bool flip = false;
  bool erase = false;
};
// Parses "crop,flip,erase" (spaces around names allowed; "" or "none" is no augmentation); an
// unknown or repeated name is a UsageError naming it and the valid ones.
Augmentations parse_augment(const std::string& augment);

// Loads a JSON config file (// and /* */ comments allowed), or a YAML one (.yaml / .yml,
// trainer/yaml_config.h); errors name the file and the problem.
TrainConfig load_config(const std::string& path);
// The file's keys alone, as JSON (not yet checked against the config's keys).
nlohmann::json load_config_json(const std::string& path);
std::vector<std::string> config_keys();

}  // namespace ringlet::trainer
