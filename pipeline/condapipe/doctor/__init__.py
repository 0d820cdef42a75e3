"""doctor: machine checks before a build."""
