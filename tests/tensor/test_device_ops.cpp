// The device op suite (device_op_suite.h) on the emulated GPU, whose arithmetic is the CPU's:
// every comparison is bit for bit.
#include "device_op_suite.h"

ringlet::core::Device suite::suite_device() { return ringlet::core::Device::emu(0); }
double suite::suite_tolerance() { return 0.0; }
