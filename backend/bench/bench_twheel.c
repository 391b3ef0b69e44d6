/* placeholder until the module owner writes it */
#include "sn_bench.h"
void sn_bench_twheel(void) {}
