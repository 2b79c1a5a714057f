import pkg_resources

pkg_resources.require('tablecore>=2')
