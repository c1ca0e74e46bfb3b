// The model's all-reduce algorithm by size, built in: what `auto` takes on host buffers with
// RINGLET_ALGO_TABLE=model (CommOptions::algo_table = "model"). The model's choice (model/,
// `ringlet model table`) under its default profile, round figures of a 2-core VM's fit, for 2-8
// ranks on one host; tests/model/test_default_tables checks that they are what the model says
// today. Not the default: at 16-256 KiB it picks Rabenseifner's (2 ranks), the tree (3, 8) or
// recursive doubling (4) where the measured thresholds' pick is faster (bench/RESULTS.md,
// 2026-12-01 "Both trees at once").
#pragma once

#include "collectives/algorithm_table.h"

namespace ringlet::collectives {

const AlgorithmTables& default_algorithm_tables();
// `world_size`'s default table; empty where there is none (then the thresholds decide).
AlgorithmTable default_algorithm_table(int world_size);

}  // namespace ringlet::collectives
