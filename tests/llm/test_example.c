/* Runs the embedding guide's example program on the default model, as an
 * integrator would, and checks what it prints. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *models_dir(void)
{
    const char *d = getenv("SY_MODELS_DIR");
    return d && *d ? d : SY_SOURCE_ROOT "/models";
}

Test(example, generate_answers_a_chat_prompt_with_the_default_model)
{
    char cmd[4096], out[16384];
    snprintf(cmd, sizeof cmd, "'%s' '%s/SmolLM2-135M-Instruct.Q4_1.gguf' "
             "'What is the capital of France?' 24 2>&1", SY_EXAMPLE_BIN, models_dir());
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    cr_assert_eq(status, 0, "example failed (%d):\n%s", status, out);
    cr_assert(strstr(out, "Paris") != NULL, "greedy answer should name Paris:\n%s", out);
    cr_assert(strstr(out, "decode") != NULL && strstr(out, "peak RSS") != NULL,
              "metrics line missing:\n%s", out);
}

Test(example, reports_a_missing_model_file_by_name)
{
    char cmd[4096], out[4096];
    snprintf(cmd, sizeof cmd, "'%s' /nonexistent/model.gguf hi 2>&1", SY_EXAMPLE_BIN);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    cr_assert_neq(status, 0);
    cr_assert(strstr(out, "/nonexistent/model.gguf") != NULL, "error must name the file:\n%s", out);
}
