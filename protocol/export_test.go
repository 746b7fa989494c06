package protocol

// Vanishes is vanishes, for the external tests' model of a receiver.
var Vanishes = vanishes
