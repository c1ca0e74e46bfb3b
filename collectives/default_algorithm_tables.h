// The model's all-reduce algorithm by size, built in: what `auto` takes on host buffers of ranks
// on one host unless RINGLET_ALGO_TABLE names a file or "thresholds" (CommOptions::algo_table).
// The model's choice (model/, `ringlet model table`) under its default profile, round figures of
// a 2-core VM's fit, for 2-8 ranks, among the algorithms `auto` picks on its own
// (automatic_picks); tests/model/test_default_tables checks that they are what the model says
// today. Measured against the thresholds they replaced: bench/RESULTS.md, 2026-12-02 "auto from
// the model".
#pragma once

#include "collectives/algorithm_table.h"

namespace ringlet::collectives {

const AlgorithmTables& default_algorithm_tables();
// `world_size`'s default table; empty where there is none (then the thresholds decide).
AlgorithmTable default_algorithm_table(int world_size);

}  // namespace ringlet::collectives
