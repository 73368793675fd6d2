/* cmd_keygen: `pftnet keygen NAME [--dir DIR] [--force]` writes a node keypair as NAME.key (secret, 0600)
 * and NAME.pub (public). */
#include "pft_alloc.h"
#include "pft_cli.h"
#include "pft_cmd.h"
#include "pft_error.h"
#include "pft_fsio.h"
#include "pft_keys.h"
#include "pft_topo_attr.h"

#include <stdio.h>
#include <string.h>

int pft_cmd_keygen(int argc, char **argv)
{
    const char *dir;
    int force, quiet;
    const pft_opt_t opts[] = {
        {"dir", PFT_OPT_STRING, &dir, ".", 0, -1, 0, "DIR",
         "folder for NAME.key and NAME.pub (created if missing)"},
        {"force", PFT_OPT_FLAG, &force, NULL, 0, -1, 0, NULL,
         "replace existing key files (the old key is lost)"},
        {"quiet", PFT_OPT_FLAG, &quiet, NULL, 0, -1, 0, NULL, "print only the public key line"},
        {0},
    };
    const pft_cli_t cli = {
        "pftnet keygen",
        "NAME",
        1,
        1,
        "Generates a node's Ed25519 keypair. NAME.key holds the secret key (mode 0600; never share it; a "
        "node\n"
        "refuses a key file that group or others can read); NAME.pub holds the public key that other nodes\n"
        "list in the topology (node attribute key=\"NAME.pub\", or the printed line inline). The same key\n"
        "signs the node's bundles and, converted to X25519, encrypts its connections (CURVE).\n"
        "Existing files are never overwritten without --force. The public line is printed on stdout.",
        opts};
    const char *pos[1];
    int n_pos = 0;
    int rc = pft_cli_parse(&cli, argc, argv, pos, &n_pos);
    if (rc)
        return rc == 1 ? 0 : 2;
    const char *name = pos[0];
    if (!pft_topo_name_ok(name)) {
        fprintf(stderr,
                "pftnet keygen: NAME '%s': expected 1..64 letters, digits, '_', '-' or '.' (not first '-' or "
                "'.'), e.g. the node id\n",
                name);
        return 2;
    }
    int code = 1;
    char *base = NULL, *sec = NULL, *pub = NULL;
    pft_keypair_t *kp = NULL;
    if (pft_fsio_mkdirs(dir) != 0 || !(base = pft_fsio_join(dir, name))) {
        fprintf(stderr, "pftnet keygen: %s\n", base ? pft_errmsg() : "out of memory");
        goto out;
    }
    sec = pft_alloc(strlen(base) + 5);
    pub = pft_alloc(strlen(base) + 5);
    if (!sec || !pub || !(kp = pft_keypair_generate())) {
        fprintf(stderr, "pftnet keygen: %s\n", sec && pub ? pft_errmsg() : "out of memory");
        goto out;
    }
    sprintf(sec, "%s.key", base);
    sprintf(pub, "%s.pub", base);
    if ((rc = pft_keypair_save(kp, sec, pub, name, force)) != 0) {
        fprintf(stderr, "pftnet keygen: %s\n", pft_errmsg());
        goto out;
    }
    char line[PFT_KEY_TEXT_MAX], fp[PFT_KEY_FINGERPRINT_LEN + 1];
    pft_pubkey_format(pft_keypair_public(kp), name, line, sizeof line);
    pft_pubkey_fingerprint(pft_keypair_public(kp), fp);
    if (!quiet)
        fprintf(stderr, "pftnet keygen: wrote %s (secret, mode 0600) and %s; fingerprint %s\n", sec, pub, fp);
    printf("%s\n", line);
    code = 0;
out:
    pft_keypair_destroy(&kp);
    pft_free(base);
    pft_free(sec);
    pft_free(pub);
    return code;
}
