module github.com/sluicemq/sluice/bench/tracestalls

go 1.26.0

require golang.org/x/exp v0.0.0-20261011100332-faecfb24eb49
