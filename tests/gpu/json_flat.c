/* json_flat (gflow-json-flat): prints a JSON document (a file, or stdin) as one line per
 * value, `path=value`, the path's parts joined by dots (`gpus.1.processes.0.pid=4242`),
 * strings unquoted with newlines as \n, null as `null`, an empty array or object as
 * `path=[]` or `path={}` (so that its key is seen). tests/gpu/check.sh reads
 * `ginfo -o json` with it: a POSIX shell script on a machine that has only the NVIDIA
 * driver has neither jq nor python. Exit status: 0, 1 unreadable JSON, 2 usage. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static void flat(const char *path, json_t *v)
{
    char sub[1024];
    const char *dot = *path ? "." : "";
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        if (json_object_size(v) == 0) /* so that a key whose value is empty is seen */
            printf("%s={}\n", path);
        json_object_foreach (v, k, x) {
            snprintf(sub, sizeof(sub), "%s%s%s", path, dot, k);
            flat(sub, x);
        }
        break;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *x;
        if (json_array_size(v) == 0)
            printf("%s=[]\n", path);
        json_array_foreach (v, i, x) {
            snprintf(sub, sizeof(sub), "%s%s%zu", path, dot, i);
            flat(sub, x);
        }
        break;
    }
    case JSON_STRING:
        printf("%s=", path);
        for (const char *s = json_string_value(v); *s; s++)
            if (*s == '\n')
                fputs("\\n", stdout);
            else
                putchar(*s);
        putchar('\n');
        break;
    case JSON_INTEGER:
        printf("%s=%" JSON_INTEGER_FORMAT "\n", path, json_integer_value(v));
        break;
    case JSON_REAL:
        printf("%s=%g\n", path, json_real_value(v));
        break;
    case JSON_TRUE:
        printf("%s=true\n", path);
        break;
    case JSON_FALSE:
        printf("%s=false\n", path);
        break;
    case JSON_NULL:
        printf("%s=null\n", path);
        break;
    }
}

int main(int argc, char **argv)
{
    if (argc > 2) {
        fprintf(stderr, "Usage: gflow-json-flat [FILE]\n");
        return 2;
    }
    json_error_t e;
    json_t *v = argc == 2 && strcmp(argv[1], "-") != 0
                    ? json_load_file(argv[1], JSON_DECODE_ANY, &e)
                    : json_loadf(stdin, JSON_DECODE_ANY, &e);
    if (!v) {
        fprintf(stderr, "gflow-json-flat: line %d: %s\n", e.line, e.text);
        return 1;
    }
    flat("", v);
    json_decref(v);
    return 0;
}
