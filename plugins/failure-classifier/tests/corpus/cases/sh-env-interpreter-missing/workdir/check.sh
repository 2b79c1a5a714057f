#!/usr/bin/env rubycorpus9
puts 2 + 3
