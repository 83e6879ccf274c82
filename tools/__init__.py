"""Project tooling outside the product and outside the lanes: `tools.ci` (CI's stages, their
timing table, and the developer's loop over the lanes a change touches)."""
