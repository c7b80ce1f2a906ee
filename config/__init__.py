"""fabricmon's configuration: one typed tree (``config.model.Config``) loaded by ``config.loader.load_config``."""
