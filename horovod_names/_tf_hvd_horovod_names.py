"""Start-up hook of tf-hvd-horovod (its .pth line imports this): installs Horovod's
import names over tf_hvd. Without tf_hvd (uninstalled since) it does nothing, so no
interpreter start-up ever fails here."""

try:
    import tf_hvd.horovod_names as _names
except ImportError:
    pass
else:
    _names.install()
