// Checkpoint layout on top of safetensors; see checkpoint.h.
#include "checkpoint/checkpoint.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "checkpoint/safetensors.h"
#include "core/env.h"
#include "core/error.h"

namespace ringlet::checkpoint {
namespace {

constexpr const char* kFormat = "ringlet-checkpoint-1";

std::string exact(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
}

// The checkpoint's metadata, read strictly: a missing key, a number that is not one or one out
// of range is a ValueError naming the file and the key.
struct Metadata {
  const std::filesystem::path& path;
  const safetensors::Metadata& values;

  const std::string& text(const std::string& key) const {
    auto it = values.find(key);
    RINGLET_CHECK(it != values.end(), ValueError, "checkpoint ", path.string(),
                  ": metadata has no '", key, "' (not a ringlet checkpoint?)");
    return it->second;
  }
  double real(const std::string& key) const {
    const std::string& t = text(key);
    double value = 0;
    const auto [end, error] = std::from_chars(t.data(), t.data() + t.size(), value);
    RINGLET_CHECK(error == std::errc() && end == t.data() + t.size() && std::isfinite(value),
                  ValueError, "checkpoint ", path.string(), ": metadata '", key, "' is '", t,
                  "', not a finite number");
    return value;
  }
  std::int64_t integer(const std::string& key, std::int64_t least, std::int64_t most) const {
    const std::string& t = text(key);
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(t.data(), t.data() + t.size(), value);
    RINGLET_CHECK(error == std::errc() && end == t.data() + t.size(), ValueError, "checkpoint ",
                  path.string(), ": metadata '", key, "' is '", t, "', not a whole number");
    RINGLET_CHECK(value >= least && value <= most, ValueError, "checkpoint ", path.string(),
                  ": metadata '", key, "' is ", value, ", out of range [", least, ", ", most, "]");
    return value;
  }
  bool has(const std::string& key) const { return values.count(key) != 0; }
  // The scalars under "<prefix>.", the prefix dropped.
  nn::NamedState scalars(const std::string& prefix) const {
    nn::NamedState state;
    for (const auto& [key, value] : values) {
      if (key.rfind(prefix + ".", 0) == 0) state.set(key.substr(prefix.size() + 1), real(key));
    }
    return state;
  }
};

// Writes `state` (scalars only) as "<prefix>.<key>" entries.
void put_scalars(safetensors::Metadata& meta, const std::string& prefix,
                 const nn::NamedState& state) {
  for (const auto& [key, value] : state) {
    RINGLET_CHECK(std::holds_alternative<double>(value), ValueError, "save_checkpoint: ", prefix,
                  " state '", key, "' is not a scalar");
    meta[prefix + "." + key] = exact(std::get<double>(value));
  }
}

// The format, position, config, schedule, loss scaler and partial epoch the metadata records
// ("batches" and the schedule are absent from checkpoints of older ringlets).
CheckpointInfo info_from(const Metadata& meta) {
  RINGLET_CHECK(meta.text("format") == kFormat, ValueError, "checkpoint ", meta.path.string(),
                ": format '", meta.text("format"), "', expected '", kFormat, "'");
  CheckpointInfo info;
  info.epoch = meta.integer("epoch", 0, std::numeric_limits<std::int32_t>::max());
  info.step = meta.integer("step", 0, std::int64_t{1} << 53);
  info.config = meta.text("config");
  info.scaler = meta.scalars("scaler");
  info.schedule = meta.scalars("schedule");
  if (meta.has("batches")) info.batches = meta.integer("batches", 0, std::int64_t{1} << 40);
  info.epoch_sums = meta.scalars("epoch_sums");
  return info;
}

// The file's tensors as the model's state (each with the dtype and, through load_state_dict,
// the shape of the model's tensor of that name) and the optimizer's.
void split_tensors(const std::filesystem::path& path, const safetensors::File& file,
                   const nn::Module& model, nn::StateDict& model_state,
                   nn::NamedState& optim_state) {
  std::map<std::string, core::DType> dtypes;
  for (const auto& [name, value] : model.state_dict()) dtypes.emplace(name, value.dtype());
  for (const auto& [name, value] : file.tensors) {
    if (name.rfind("model.", 0) == 0) {
      const auto it = dtypes.find(name.substr(6));
      RINGLET_CHECK(it == dtypes.end() || it->second == value.dtype(), ValueError, "checkpoint ",
                    path.string(), ": tensor '", name, "' is ",
                    safetensors::dtype_to_name(value.dtype()), " but the model's is ",
                    safetensors::dtype_to_name(it->second));
      model_state.insert(name.substr(6), value);
    } else if (name.rfind("optim.", 0) == 0) {
      optim_state.set(name.substr(6), value);
    } else {
      RINGLET_THROW(ValueError, "checkpoint ", path.string(), ": unexpected tensor '", name, "'");
    }
  }
}

// The optimizer's hyperparameters (metadata) and per-parameter state (tensors). Every step
// updates every parameter of the models trained here, so state for some parameters but not
// all is a damaged checkpoint. (None at all is a run whose steps were all skipped on f16
// overflow, or one that took none.)
void load_optimizer(const Metadata& meta, nn::NamedState& state, nn::Optimizer& optimizer) {
  RINGLET_CHECK(meta.text("optimizer") == optimizer.name(), ValueError, "checkpoint ",
                meta.path.string(), ": saved with optimizer ", meta.text("optimizer"),
                ", this run uses ", optimizer.name());
  for (const auto& [key, value] : meta.values) {
    if (key.rfind("optim.", 0) == 0) state.set(key.substr(6), meta.real(key));
  }
  try {
    optimizer.load_state_dict(state);
  } catch (const core::Error& e) {  // a hyperparameter out of range, a buffer of another shape
    RINGLET_THROW(ValueError, "checkpoint ", meta.path.string(), ": ", e.what());
  }
  const std::size_t count = optimizer.parameters().size();
  std::size_t with_state = 0;
  for (std::size_t i = 0; i < count; ++i) with_state += optimizer.has_state(i) ? 1 : 0;
  if (with_state == 0) return;
  for (std::size_t i = 0; i < count; ++i) {
    RINGLET_CHECK(optimizer.has_state(i), ValueError, "checkpoint ", meta.path.string(), ": ",
                  optimizer.name(), " state for ", with_state, " of ", count,
                  " parameters: parameter ", i, "'s is missing");
  }
}

}  // namespace

std::filesystem::path checkpoint_path(const std::filesystem::path& run_dir) {
  return run_dir / "checkpoint.safetensors";
}

void save_checkpoint(const std::filesystem::path& path, const nn::Module& model,
                     const nn::Optimizer* optimizer, const CheckpointInfo& info) {
  safetensors::NamedTensors tensors;
  safetensors::Metadata meta{{"format", kFormat},
                             {"epoch", std::to_string(info.epoch)},
                             {"step", std::to_string(info.step)},
                             {"config", info.config}};
  if (info.batches > 0) meta["batches"] = std::to_string(info.batches);
  for (const auto& [name, value] : model.state_dict()) tensors.emplace_back("model." + name, value);
  put_scalars(meta, "scaler", info.scaler);
  put_scalars(meta, "schedule", info.schedule);
  put_scalars(meta, "epoch_sums", info.epoch_sums);
  if (optimizer != nullptr) {
    meta["optimizer"] = optimizer->name();
    for (const auto& [key, value] : optimizer->state_dict()) {
      if (const auto* t = std::get_if<tensor::Tensor>(&value)) {
        tensors.emplace_back("optim." + key, *t);
      } else {
        meta["optim." + key] = exact(std::get<double>(value));
      }
    }
  }
  safetensors::write(path, tensors, meta);
}

CheckpointInfo load_checkpoint(const std::filesystem::path& path, nn::Module& model,
                               nn::Optimizer* optimizer) {
  const safetensors::File file = safetensors::read(path);
  const Metadata meta{path, file.metadata};
  const CheckpointInfo info = info_from(meta);
  nn::StateDict model_state;
  nn::NamedState optim_state;
  split_tensors(path, file, model, model_state, optim_state);
  model.load_state_dict(model_state, /*strict=*/true);
  if (optimizer != nullptr) load_optimizer(meta, optim_state, *optimizer);
  return info;
}

CheckpointInfo read_checkpoint_info(const std::filesystem::path& path) {
  const safetensors::Metadata values = safetensors::read_metadata(path);
  return info_from(Metadata{path, values});
}

}  // namespace ringlet::checkpoint
