module labelsbench

go 1.19
