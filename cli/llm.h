/* `opforge llm check`: one tiny request to the configured LLM endpoint. */
#ifndef OPFORGE_CLI_LLM_H
#define OPFORGE_CLI_LLM_H

/* `opforge llm check [--llm-* options]`: argv[0] is "llm". Reads the endpoint's settings as
 * `opforge serve` does (OPFORGE_LLM_* variables, then options), sends one small chat
 * completion and prints the model that answered, the latency and the token counts. The
 * key is never printed. Exit status: 0 answered; 1 the endpoint failed (the reason on
 * stderr); 2 bad usage or settings. */
int cli_llm_main(int argc, char **argv);

#endif
