// replaced by the video I/O sources
