/* placeholder until the module owner writes it */
#include <stdio.h>
int sn_trace_nba_main(int argc, char **argv);
int sn_trace_nba_main(int argc, char **argv) { (void)argc; (void)argv; fputs("not built yet\n", stderr); return 2; }
