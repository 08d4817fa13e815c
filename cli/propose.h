/* `opforge propose`: the builtin proposer's candidate for a program, without evaluating it. */
#ifndef OPFORGE_CLI_PROPOSE_H
#define OPFORGE_CLI_PROPOSE_H

/* `opforge propose FILE.py [--strategy NAME] [--device cpu|meta|N] [--python PATH]
 * [--evaluator PATH]`: argv[0] is "propose". Profiles the program (CPU torch is enough),
 * matches it to a builtin family, applies the knob move of the seed-memory strategy NAME
 * (none: the family defaults) and prints {"family","match","candidate"} as JSON. Exit
 * status: 0 printed; 1 profile failed, unsupported_by_builtin, or the move does not fit
 * the task (the reason on stderr); 2 bad usage. */
int cli_propose_main(int argc, char **argv);

#endif
