package demo

type Node struct{ Next *Node; V int }

func Last(n *Node) int { for n.Next != nil { n = n.Next }; return n.V }
