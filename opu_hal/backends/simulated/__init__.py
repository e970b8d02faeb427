"""``backend = "simulated"``: optics (:mod:`.optics`), camera (:mod:`.camera`), device (:mod:`.device`)."""
