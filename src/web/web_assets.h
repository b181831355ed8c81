/* web_assets: the dashboard's files, built into gflowd (generated from web/dist by
 * scripts/gen-web-assets.py), so that `gflowd web` needs nothing beside the binary. */
#ifndef GFLOW_WEB_ASSETS_H
#define GFLOW_WEB_ASSETS_H

#include <stddef.h>

struct web_asset {
    const char *path; /* "/app.js" */
    const char *content_type;
    const unsigned char *data;
    size_t len;
};

extern const struct web_asset web_assets[];
extern const size_t web_assets_count;

#endif
