// Package archtest holds tests of the code's layout that no one package
// owns: which package may reach what. It has no code of its own.
package archtest
