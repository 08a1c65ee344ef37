/* SPDX-License-Identifier: Apache-2.0 */
/* The subcommands of `tessera`. Each takes the arguments after its name and
 * returns the process exit status (common.h: EXIT_OK, EXIT_FAILED,
 * EXIT_USAGE). */
#ifndef TESSERA_TOOLS_COMMANDS_H
#define TESSERA_TOOLS_COMMANDS_H

int cmd_devices(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_explain(int argc, char **argv);

#endif /* TESSERA_TOOLS_COMMANDS_H */
