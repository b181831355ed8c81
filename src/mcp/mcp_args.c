/* mcp_args: a tool's arguments checked against its input schema, so that a wrong call
 * gets a JSON-RPC "invalid params" error naming the argument, and the tools themselves
 * read values of the types they declared. Only the parts of JSON Schema that gflow-mcp's
 * schemas use are understood. */
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

/* Whether v is of the JSON Schema type named type. */
static bool type_matches(const json_t *v, const char *type)
{
    if (!strcmp(type, "string"))
        return json_is_string(v);
    if (!strcmp(type, "integer"))
        return json_is_integer(v);
    if (!strcmp(type, "number"))
        return json_is_number(v);
    if (!strcmp(type, "boolean"))
        return json_is_boolean(v);
    if (!strcmp(type, "array"))
        return json_is_array(v);
    if (!strcmp(type, "object"))
        return json_is_object(v);
    if (!strcmp(type, "null"))
        return json_is_null(v);
    return false;
}

/* "an integer", "a string or null" for a message. */
static char *type_words(const json_t *type)
{
    struct strbuf sb;
    strbuf_init(&sb);
    size_t i;
    const json_t *t;
    if (json_is_string(type)) {
        const char *s = json_string_value(type);
        strbuf_addf(&sb, "%s %s", strchr("aeiou", s[0]) ? "an" : "a", s);
    } else {
        json_array_foreach (type, i, t) {
            const char *s = json_string_value(t);
            strbuf_addf(&sb, "%s%s %s", i ? " or " : "", strchr("aeiou", s[0]) ? "an" : "a", s);
        }
    }
    return strbuf_detach(&sb);
}

static int check_value(const json_t *schema, const json_t *v, const char *what, char **err);

static int check_type(const json_t *schema, const json_t *v, const char *what, char **err)
{
    const json_t *type = json_object_get(schema, "type");
    bool ok = !type;
    size_t i;
    const json_t *t;
    if (json_is_string(type))
        ok = type_matches(v, json_string_value(type));
    json_array_foreach (type, i, t)
        ok = ok || type_matches(v, json_string_value(t));
    if (!ok) {
        char *words = type_words(type);
        *err = xasprintf("%s must be %s", what, words);
        free(words);
        return -1;
    }
    return 0;
}

static int check_enum(const json_t *schema, const json_t *v, const char *what, char **err)
{
    const json_t *choices = json_object_get(schema, "enum");
    if (!choices)
        return 0;
    size_t i;
    const json_t *c;
    json_array_foreach (choices, i, c) {
        if (json_equal(c, v))
            return 0;
    }
    char *list = json_dumps(choices, JSON_COMPACT | JSON_ENCODE_ANY);
    *err = xasprintf("%s must be one of %s", what, list);
    free(list);
    return -1;
}

static int check_bounds(const json_t *schema, const json_t *v, const char *what, char **err)
{
    const json_t *min = json_object_get(schema, "minimum");
    const json_t *max = json_object_get(schema, "maximum");
    if (json_is_number(v)) {
        double x = json_number_value(v);
        if (min && x < json_number_value(min)) {
            *err = xasprintf("%s must be at least %.15g", what, json_number_value(min));
            return -1;
        }
        if (max && x > json_number_value(max)) {
            *err = xasprintf("%s must be at most %.15g", what, json_number_value(max));
            return -1;
        }
    }
    const json_t *min_len = json_object_get(schema, "minLength");
    if (json_is_string(v) && min_len &&
        json_string_length(v) < (size_t)json_integer_value(min_len)) {
        *err = xasprintf("%s must not be empty", what);
        return -1;
    }
    const json_t *max_items = json_object_get(schema, "maxItems");
    if (json_is_array(v) && max_items &&
        json_array_size(v) > (size_t)json_integer_value(max_items)) {
        *err = xasprintf("%s has more than %lld items", what,
                         (long long)json_integer_value(max_items));
        return -1;
    }
    return 0;
}

/* An object's members: required ones present, unknown ones refused (when
 * additionalProperties is false) or checked against additionalProperties' schema. */
static int check_object(const json_t *schema, const json_t *v, const char *what, char **err)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *extra = json_object_get(schema, "additionalProperties");
    size_t i;
    const json_t *req;
    json_array_foreach (json_object_get(schema, "required"), i, req) {
        if (!json_object_get(v, json_string_value(req))) {
            *err = xasprintf("%s: '%s' is required", what, json_string_value(req));
            return -1;
        }
    }
    const char *key;
    const json_t *member;
    json_object_foreach ((json_t *)v, key, member) {
        const json_t *sub = json_object_get(props, key);
        if (!sub && json_is_false(extra)) {
            struct strbuf names;
            strbuf_init(&names);
            const char *k;
            const json_t *p;
            json_object_foreach ((json_t *)props, k, p)
                strbuf_addf(&names, "%s%s", names.len ? ", " : "", k);
            *err = xasprintf("%s: unknown argument '%s' (the arguments are: %s)", what, key,
                             names.len ? names.buf : "none");
            strbuf_free(&names);
            return -1;
        }
        if (!sub)
            sub = json_is_object(extra) ? extra : NULL;
        if (!sub)
            continue;
        char *inner = xasprintf("'%s'", key);
        int rc = check_value(sub, member, inner, err);
        free(inner);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static int check_value(const json_t *schema, const json_t *v, const char *what, char **err)
{
    if (check_type(schema, v, what, err) < 0 || check_enum(schema, v, what, err) < 0 ||
        check_bounds(schema, v, what, err) < 0)
        return -1;
    if (json_is_object(v))
        return check_object(schema, v, what, err);
    const json_t *items = json_object_get(schema, "items");
    if (json_is_array(v) && items) {
        size_t i;
        const json_t *item;
        json_array_foreach (v, i, item) {
            char *inner = xasprintf("%s[%zu]", what, i);
            int rc = check_value(items, item, inner, err);
            free(inner);
            if (rc < 0)
                return -1;
        }
    }
    return 0;
}

int mcp_args_check(const json_t *schema, const json_t *args, char **err)
{
    return check_value(schema, args, "the arguments", err);
}

const char *mcp_arg_str(const json_t *args, const char *name, const char *dflt)
{
    const json_t *v = json_object_get(args, name);
    return json_is_string(v) ? json_string_value(v) : dflt;
}

int64_t mcp_arg_int(const json_t *args, const char *name, int64_t dflt)
{
    const json_t *v = json_object_get(args, name);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

bool mcp_arg_bool(const json_t *args, const char *name, bool dflt)
{
    const json_t *v = json_object_get(args, name);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}
