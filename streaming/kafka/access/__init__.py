"""Who may do what on a cluster: the job's least ACL set and its check at start, grants applied by hand, and the
topic ACL sync that keeps a mirrored topic's readers able to read its sink."""
