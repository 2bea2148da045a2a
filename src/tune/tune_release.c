/* sublet — the tuner's answers as the user's PyTorch release takes them
 * (sublet_tune_conf_adapt, sublet/tune.h): the search space spells the
 * collector's memory fraction per_process_memory_fraction:F, an option 2.9
 * added; before it a PYTORCH_CUDA_ALLOC_CONF string drops the entry for the
 * call torch.cuda.set_per_process_memory_fraction(F), and a SUBLET_ALLOC_CONF
 * or replay string spells it sublet's memory_fraction:F, the same call. */
#include <stdio.h>
#include <string.h>

#include "base/errmsg.h"
#include "tune/tune_internal.h"

static const char ppmf[] = "per_process_memory_fraction:";

/* "pytorch_version:V," (V: version, or "newest" when NULL or "") then conf,
 * parsed by sublet's parser into *s: SUBLET_OK or its error. */
static sublet_status parse_under(const char *version, const char *conf, sublet_settings *s,
                                 char *err, size_t err_cap)
{
    char buf[SUBLET_TUNE_CONF_MAX + 64];
    int n = snprintf(buf, sizeof buf, "pytorch_version:%s%s%s",
                     version && *version ? version : "newest", *conf ? "," : "", conf);
    if (n < 0 || (size_t)n >= sizeof buf)
        return sl_fail(err, err_cap, SUBLET_ERR_INVALID_ARGUMENT, "settings too long: %s", conf);
    sublet_settings_default(s);
    return sublet_settings_parse(s, buf, err, err_cap);
}

int tn_conf_release(const char *version, const char *conf, int target, char *out, size_t cap,
                    double *fraction)
{
    *fraction = 0.0;
    const char *at = conf;
    while ((at = strstr(at, ppmf)) != NULL && at != conf && at[-1] != ',')
        at++;
    sublet_settings s;
    if (!at || parse_under(version, "per_process_memory_fraction:0.5", &s, NULL, 0) == SUBLET_OK)
        return snprintf(out, cap, "%s", conf) < (int)cap ? 0 : -1;
    size_t len = strcspn(at, ","), head = (size_t)(at - conf);
    const char *value = at + sizeof ppmf - 1, *rest = at + len;
    int n;
    if (target == SUBLET_TUNE_FOR_SUBLET) {
        n = snprintf(out, cap, "%.*smemory_fraction:%.*s%s", (int)head, conf,
                     (int)(rest - value), value, rest);
    } else {
        char entry[64];
        snprintf(entry, sizeof entry, "%.*s", (int)len, at);
        if (parse_under(NULL, entry, &s, NULL, 0) != SUBLET_OK)
            return -1;
        *fraction = s.per_process_memory_fraction;
        if (*rest == ',')
            rest++; /* "F,x" -> "x" */
        else if (head)
            head--; /* "x,F" -> "x" */
        n = snprintf(out, cap, "%.*s%s", (int)head, conf, rest);
    }
    return n >= 0 && n < (int)cap ? 0 : -1;
}

sublet_status sublet_tune_conf_adapt(const char *conf, int target, const char *pytorch_version,
                                     sublet_tune_conf_form *out, char *err, size_t err_cap)
{
    if (err && err_cap)
        err[0] = '\0';
    if (!out)
        return SUBLET_ERR_INVALID_ARGUMENT;
    memset(out, 0, sizeof *out);
    if (!conf || (target != SUBLET_TUNE_FOR_PYTORCH && target != SUBLET_TUNE_FOR_SUBLET))
        return SUBLET_ERR_INVALID_ARGUMENT;
    sublet_settings s;
    sublet_status st = parse_under(pytorch_version, "", &s, err, err_cap);
    if (st != SUBLET_OK)
        return st;
    if (tn_conf_release(pytorch_version, conf, target, out->conf, sizeof out->conf,
                        &out->fraction_call) != 0) {
        memset(out, 0, sizeof *out);
        return sl_fail(err, err_cap, SUBLET_ERR_INVALID_ARGUMENT, "settings too long: %s", conf);
    }
    if ((st = parse_under(pytorch_version, out->conf, &s, err, err_cap)) != SUBLET_OK) {
        memset(out, 0, sizeof *out);
        return st;
    }
    /* the oldest release from which on every one takes it */
    out->oldest_release = SUBLET_PYTORCH_NEWEST;
    if (parse_under(NULL, out->conf, &s, NULL, 0) != SUBLET_OK)
        return SUBLET_OK;
    for (uint32_t v = SUBLET_PYTORCH_NEWEST_AS; v >= SUBLET_PYTORCH_OLDEST; v--) {
        char name[16];
        snprintf(name, sizeof name, "%u.%u", (unsigned)(v / 100), (unsigned)(v % 100));
        if (parse_under(name, out->conf, &s, NULL, 0) != SUBLET_OK)
            break;
        out->oldest_release = v;
    }
    return SUBLET_OK;
}

/* One answer or Pareto point of sublet_tune, in place. */
static void adapt_eval(sublet_tune_eval *e, int target, const char *version)
{
    sublet_tune_conf_form f;
    if (sublet_tune_conf_adapt(e->conf, target, version, &f, NULL, 0) != SUBLET_OK)
        return; /* not a string of the space: kept as it is */
    memcpy(e->conf, f.conf, sizeof e->conf);
    e->fraction_call = f.fraction_call;
    e->oldest_release = f.oldest_release;
}

void tn_release_forms(sublet_tune_result *r, const char *version)
{
    adapt_eval(&r->pytorch, SUBLET_TUNE_FOR_PYTORCH, version);
    adapt_eval(&r->sublet, SUBLET_TUNE_FOR_SUBLET, version);
    for (size_t i = 0; i < r->npareto_pytorch; i++)
        adapt_eval(&r->pareto_pytorch[i], SUBLET_TUNE_FOR_PYTORCH, version);
    for (size_t i = 0; i < r->npareto_sublet; i++)
        adapt_eval(&r->pareto_sublet[i], SUBLET_TUNE_FOR_SUBLET, version);
    sublet_tune_plan *p = &r->plan;
    double f;
    char conf[SUBLET_TUNE_CONF_MAX];
    if (tn_conf_release(version, p->conf, SUBLET_TUNE_FOR_SUBLET, conf, sizeof conf, &f) == 0 &&
        strcmp(conf, p->conf) != 0) {
        memcpy(p->conf, conf, sizeof p->conf);
        snprintf(p->env, sizeof p->env, "%s%s%s", p->conf, p->conf[0] ? "," : "", p->option);
    }
}
