/* sublet CLI — subcommands and the small JSON writer they share. */
#ifndef SUBLET_CLI_H
#define SUBLET_CLI_H

#include <stdint.h>
#include <stdio.h>

/* Exit codes of every subcommand. */
enum { CLI_OK = 0, CLI_ERROR = 1, CLI_USAGE = 2 };

/* `sublet replay ...`: argv[0] is "replay". */
int cli_replay(int argc, char **argv);
/* The replay part of `sublet help`. */
void cli_replay_usage(FILE *out);

/* ---- JSON writer (json.c) ---------------------------------------------------------- */
/* Writes one JSON document to a FILE*, pretty-printed with two-space
 * indentation.  Keys and strings are escaped; bytes that are not valid UTF-8
 * become U+FFFD, so the output is always valid JSON. */
#define JSON_MAX_DEPTH 32

typedef struct json_writer {
    FILE *out;
    int depth;
    int count[JSON_MAX_DEPTH]; /* values written at each open level */
    int after_key;             /* a key was just written: the value follows inline */
} json_writer;

void json_init(json_writer *w, FILE *out);
void json_object_begin(json_writer *w);
void json_object_end(json_writer *w);
void json_array_begin(json_writer *w);
void json_array_end(json_writer *w);
void json_key(json_writer *w, const char *key);
void json_string(json_writer *w, const char *s);
void json_u64(json_writer *w, uint64_t v);
void json_i64(json_writer *w, int64_t v);
void json_double(json_writer *w, double v);
void json_bool(json_writer *w, int v);
void json_null(json_writer *w);
/* A value that is already JSON text (written as is). */
void json_raw(json_writer *w, const char *text);
/* Convenience: key + value. */
void json_kv_u64(json_writer *w, const char *key, uint64_t v);
void json_kv_string(json_writer *w, const char *key, const char *s);
/* Finish the document: a newline after the top-level value (which the
 * caller has closed), then flush. */
void json_finish(json_writer *w);
/* Escape `s` as a JSON string literal (with quotes) into out. */
void json_write_escaped(FILE *out, const char *s);

#endif
