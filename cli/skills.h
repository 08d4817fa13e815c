/* `opforge skills`: list, export and import the skill memory of a server. */
#ifndef OPFORGE_CLI_SKILLS_H
#define OPFORGE_CLI_SKILLS_H

/* `opforge skills list [--family F] | export [-o FILE] | import FILE` with --server and
 * --token-file: argv[0] is "skills". Returns the exit status: 0 done, 1 refused or
 * unreachable (the server's error is printed), 2 bad usage or an unusable file. */
int cli_skills_main(int argc, char **argv);

#endif
