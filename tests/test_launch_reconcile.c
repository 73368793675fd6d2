/* Tests of the launcher's reconciliation (pft_launch_reconcile): each sent hand-off's verdict from its
 * sender's state and its receiver's record, and which verdicts fail the run (the launch's exit status is 1
 * when any does: pft_launch_collect). e2e_handoff_faults checks the same on real launches. */
#include "pft_launch_int.h"
#include "pft_test.h"

#include <jansson.h>

/* The nodes array of a run: a sent one hand-off (id "B1" to b, in sender state `state`); b received the
 * bundles in `held` (comma-free ids, NULL-terminated), or left no result.json when held is NULL. */
static json_t *run(const char *state, const char *const *held)
{
    json_t *a =
        json_pack("{s:s,s:[{s:s,s:s,s:s}]}", "id", "a", "sent", "to", "b", "bundle_id", "B1", "state", state);
    json_t *b = held ? json_pack("{s:s,s:[]}", "id", "b", "received")
                     : json_pack("{s:s,s:s}", "id", "b", "status", "no result.json");
    for (int i = 0; held && held[i]; i++)
        json_array_append_new(json_object_get(b, "received"), json_pack("{s:s}", "bundle_id", held[i]));
    return json_pack("[o,o]", a, b);
}

/* The verdict of the run's one hand-off, and whether reconciliation counted it as failing. */
static void check(const char *state, const char *const *held, const char *want, int fails)
{
    json_t *nodes = run(state, held), *rep = NULL;
    int bad = pft_launch_reconcile(nodes, &rep, 0);
    const char *v = json_string_value(json_object_get(json_array_get(rep, 0), "verdict"));
    CHECK_MSG(json_array_size(rep) == 1 && v && strcmp(v, want) == 0,
              "sender %s, receiver holds %s: verdict %s", state,
              held ? (held[0] ? held[0] : "nothing") : "(no record)", v ? v : "(none)");
    CHECK_MSG(bad == fails, "verdict %s: %d failing hand-off(s), expected %d", want, bad, fails);
    json_decref(rep);
    json_decref(nodes);
}

/* Every verdict, and its effect on the exit status: lost and contradiction fail the run; ok, used (the sender
 * gave up, the receiver used it) and unverified (the receiver left no record: its own failure, if any, fails
 * the run) do not. */
static void test_verdicts(void)
{
    const char *it[] = {"B1", NULL}, *other[] = {"B2", NULL}, *none[] = {NULL};
    check("acked", it, "ok", 0);
    check("delivered", it, "ok", 0);
    check("failed", other, "lost", 1);
    check("failed", none, "lost", 1);
    check("failed", NULL, "lost", 1);
    check("acked", other, "contradiction", 1);
    check("delivered", none, "contradiction", 1);
    check("failed", it, "used", 0);
    check("unconfirmed", it, "used", 0);
    check("acked", NULL, "unverified", 0);
}

/* Hand-offs add up; fallbacks are left to the fallback report. */
static void test_counts(void)
{
    const char *none[] = {NULL};
    json_t *nodes = run("acked", none), *rep = NULL;
    json_t *sent = json_object_get(json_array_get(nodes, 0), "sent");
    json_array_append_new(sent, json_pack("{s:s,s:s,s:s}", "to", "b", "bundle_id", "B3", "state", "failed"));
    json_array_append_new(sent, json_pack("{s:s,s:s,s:s,s:s}", "to", "b", "bundle_id", "B4", "state",
                                          "failed", "fallback_for", "c"));
    CHECK(pft_launch_reconcile(nodes, &rep, 0) == 2 && json_array_size(rep) == 2);
    json_decref(rep);
    json_decref(nodes);
}

int main(void)
{
    RUN(test_verdicts);
    RUN(test_counts);
    return pft_test_done();
}
