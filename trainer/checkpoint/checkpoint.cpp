// Checkpoint layout on top of safetensors; see checkpoint.h.
#include "trainer/checkpoint/checkpoint.h"

#include <sstream>

#include "core/env.h"
#include "core/error.h"
#include "trainer/checkpoint/safetensors.h"

namespace ringlet::trainer {
namespace {

constexpr const char* kFormat = "ringlet-checkpoint-1";

std::string exact(double value) {
  std::ostringstream out;
  out.precision(17);
  out << value;
  return out.str();
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
  for (const auto& [name, value] : model.state_dict()) tensors.emplace_back("model." + name, value);
  for (const auto& [key, value] : info.scaler) {
    RINGLET_CHECK(std::holds_alternative<double>(value), ValueError,
                  "save_checkpoint: loss scaler state '", key, "' is not a scalar");
    meta["scaler." + key] = exact(std::get<double>(value));
  }
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
  const auto meta = [&](const std::string& key) -> const std::string& {
    auto it = file.metadata.find(key);
    RINGLET_CHECK(it != file.metadata.end(), ValueError, "checkpoint ", path.string(),
                  ": metadata has no '", key, "' (not a ringlet checkpoint?)");
    return it->second;
  };
  RINGLET_CHECK(meta("format") == kFormat, ValueError, "checkpoint ", path.string(), ": format '",
                meta("format"), "', expected '", kFormat, "'");
  nn::StateDict model_state;
  nn::NamedState optim_state;
  for (const auto& [name, value] : file.tensors) {
    if (name.rfind("model.", 0) == 0) {
      model_state.insert(name.substr(6), value);
    } else if (name.rfind("optim.", 0) == 0) {
      optim_state.set(name.substr(6), value);
    } else {
      RINGLET_THROW(ValueError, "checkpoint ", path.string(), ": unexpected tensor '", name, "'");
    }
  }
  model.load_state_dict(model_state, /*strict=*/true);
  if (optimizer != nullptr) {
    RINGLET_CHECK(meta("optimizer") == optimizer->name(), ValueError, "checkpoint ", path.string(),
                  ": saved with optimizer ", meta("optimizer"), ", this run uses ",
                  optimizer->name());
    for (const auto& [key, value] : file.metadata) {
      if (key.rfind("optim.", 0) == 0) optim_state.set(key.substr(6), std::stod(value));
    }
    optimizer->load_state_dict(optim_state);
  }
  CheckpointInfo info;
  info.epoch = core::parse_int(meta("epoch"), "checkpoint epoch");
  info.step = core::parse_int(meta("step"), "checkpoint step");
  info.config = meta("config");
  for (const auto& [key, value] : file.metadata) {
    if (key.rfind("scaler.", 0) == 0) info.scaler.set(key.substr(7), std::stod(value));
  }
  return info;
}

}  // namespace ringlet::trainer
