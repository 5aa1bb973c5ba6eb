"""Speed: training and decoding throughput (`speed.bench`), where a step's time goes (`speed.profile`), and the peer implementations timed beside this one (`speed.peers`)."""
