/* pft_cmd: the pftnet subcommands; each takes (argc, argv) with argv[0] = the subcommand name, returns the exit code. */
#ifndef PFT_CMD_H
#define PFT_CMD_H

int pft_cmd_gmm(int argc, char **argv);
int pft_cmd_synth(int argc, char **argv);
int pft_cmd_check(int argc, char **argv);
int pft_cmd_launch(int argc, char **argv);
int pft_cmd_keygen(int argc, char **argv);
int pft_cmd_report(int argc, char **argv);
int pft_cmd_inspect(int argc, char **argv);
int pft_cmd_audit(int argc, char **argv);
int pft_cmd_collect(int argc, char **argv);

#endif
