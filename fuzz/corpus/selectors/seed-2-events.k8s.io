	x.example.com/y,app notin (z)
spec.nodeName=