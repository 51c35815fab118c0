"""Custom verifier hooks: conversion ops. Empty while spec rules declare every check."""
